"""methods/_prompting"""
