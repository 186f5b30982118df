from tests.conftest import anthropic_client, openai_client
from tests.scenarios import Answer, Tool, script_for


def test_openai_client_through_anthropic_upstream_tool_call(stack, upstream, unique_model):
    model = unique_model("an")
    answer = Answer(text="Hello there", tools=[Tool("toolu_1", "get_weather", '{"city": "Paris"}')])
    upstream.script(model, script_for("anthropic", answer, model, stream=True))
    client = openai_client(stack)
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_anthropic_client_through_openai_upstream(stack, upstream, unique_model):
    model = unique_model("oa")
    answer = Answer(text="Hello there", tools=[Tool("call_1", "get_weather", '{"city": "Paris"}')])
    upstream.script(model, script_for("openai", answer, model, stream=True))
    client = anthropic_client(stack)
    with client.messages.stream(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    assert message.content[1].input == {"city": "Paris"}
