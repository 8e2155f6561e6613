"""A fake LLM server speaking the OpenAI, Anthropic and Gemini wire protocols (SSE included), for
tests, benchmarks and ``rewind demo``. Built on the cassette layer's wire formats only.
"""
