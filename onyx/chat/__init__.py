"""Conversations: the prompt a chat request becomes, and how its answer is read back.

- `template.py`: the model's own chat template (Jinja), rendered;
- `setup.py`: `ChatFormat` / `ChatSetup`, a request's prompt, composed constraint and output reading;
- `tools.py`, `tool_formats.py`, `gemma_calls.py`: OpenAI tools, the call markup each model
  family writes, and the grammar of a call;
- `reasoning.py`: thinking blocks and the reasoning budget;
- `tool_parser.py`, `output.py`: an assistant's text split into content, reasoning and tool calls,
  streamed or at once.
"""
