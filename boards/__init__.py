"""pentegg.boards"""
