"""pentegg.sim"""
