"""A provider-agnostic LLM gateway that never hands over a cut answer as complete."""
