"""What every API view shares: authentication (tokens over HTTP and WebSocket), tenant and
scope resolution, rate limits, request size limits, strict inputs and parsers, and the one
error shape."""
