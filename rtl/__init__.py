"""pentegg.rtl"""
