"""Each provider's wire format (OpenAI, Anthropic, Gemini bodies and streams) and the answers
rebuilt in them from conversation content: what a replay serves when a span kept no bytes.
Apart from the cassette's model, so that a replay that has the bytes never loads them."""
