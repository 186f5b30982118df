"""Wire codecs: SSE framing and each upstream wire format's decoding into events."""
