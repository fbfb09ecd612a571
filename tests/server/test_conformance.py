"""Client libraries as their users run them, against a real server and the real default model
(the libraries are in the project's test extra):

- openai-agents: its default model (the Responses API) and its chat model, a Pydantic
  `output_type`, a function tool;
- pydantic-ai: tool output, native output, a tool;
- langchain-openai: `with_structured_output` in its three methods, `bind_tools`;
- litellm: `response_format`, tools, `responses()`.

Each asserts the output's shape and validity (the schema, the call's arguments), never what the
tiny model says. The official `openai` and `anthropic` clients have their own files
(test_agents.py, test_responses.py, test_messages.py). instructor is left out: it pins an older
`jiter` than the `openai` client in this environment needs."""

from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest
from pydantic import BaseModel

from server_process import running_server

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

WEATHER_ARGS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                "additionalProperties": False}


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("conformance")) as s:
        yield s


@pytest.fixture
def models(server):
    """The two models over a fresh client (an async client's connections belong to one event
    loop, and each test runs its own)."""
    agents.set_tracing_disabled(True)  # no trace export: nothing leaves this machine
    client = openai.AsyncOpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0, timeout=600)
    return {"responses": agents.OpenAIResponsesModel(model="onyx", openai_client=client),
            "chat": agents.OpenAIChatCompletionsModel(model="onyx", openai_client=client)}


def run(agent, text: str, **kwargs):
    return asyncio.run(agents.Runner.run(agent, text, **kwargs))


@pytest.mark.parametrize("kind", ["responses", "chat"])
def test_openai_agents_structured_output(models, kind):
    agent = agents.Agent(name="describer", instructions="Answer as JSON.", model=models[kind], output_type=City,
                         model_settings=agents.ModelSettings(max_tokens=64, temperature=0.5))
    result = run(agent, "Describe Paris.", max_turns=2)
    assert isinstance(result.final_output, City)


@pytest.mark.parametrize("kind", ["responses", "chat"])
def test_openai_agents_function_tool(models, kind):
    calls: list[dict] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        calls.append({"city": city})
        return f"18 C and clear in {city}"

    agent = agents.Agent(name="weather", instructions="Use the tool.", model=models[kind], tools=[get_weather],
                         tool_use_behavior="stop_on_first_tool",
                         model_settings=agents.ModelSettings(max_tokens=64, tool_choice="required"))
    result = run(agent, "What is the weather in Paris?", max_turns=2)
    assert len(calls) >= 1
    for args in calls:
        jsonschema.validate(args, WEATHER_ARGS)
    assert result.final_output == f"18 C and clear in {calls[0]['city']}"


# -- pydantic-ai -------------------------------------------------------------------------------

@pytest.fixture
def pydantic_model(server):
    models = pytest.importorskip("pydantic_ai.models.openai")
    providers = pytest.importorskip("pydantic_ai.providers.openai")
    return models.OpenAIChatModel("onyx", provider=providers.OpenAIProvider(base_url=server["base"] + "/v1",
                                                                             api_key="unused"))


def test_pydantic_ai_tool_output_and_native_output(pydantic_model):
    import pydantic_ai

    for output in (City, pydantic_ai.ToolOutput(City), pydantic_ai.NativeOutput(City)):
        agent = pydantic_ai.Agent(pydantic_model, output_type=output, model_settings={"max_tokens": 64})
        result = agent.run_sync("Describe Paris.")
        assert isinstance(result.output, City), output


def test_pydantic_ai_one_tool(pydantic_model):
    import pydantic_ai

    calls: list[dict] = []
    agent = pydantic_ai.Agent(pydantic_model, output_type=City, model_settings={"max_tokens": 64, "temperature": 0})

    @agent.tool_plain
    def get_population(city: str) -> int:
        """The population of a city."""
        calls.append({"city": city})
        return 2_100_000

    result = agent.run_sync("Describe Paris.", usage_limits=pydantic_ai.UsageLimits(request_limit=6))
    assert isinstance(result.output, City)
    for args in calls:
        jsonschema.validate(args, WEATHER_ARGS)
    # every request offered the tool, and each call the model made was one of the offered tools
    for message in result.all_messages():
        for part in getattr(message, "parts", []):
            if part.part_kind == "tool-call":
                assert part.tool_name in ("get_population", "final_result")


# -- langchain-openai --------------------------------------------------------------------------

@pytest.fixture
def chat_openai(server):
    lc = pytest.importorskip("langchain_openai")
    return lc.ChatOpenAI(model="onyx", base_url=server["base"] + "/v1", api_key="unused", max_tokens=64,
                         temperature=0, max_retries=0)


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_langchain_with_structured_output(chat_openai, method):
    if method == "json_mode":  # a JSON object, its keys unconstrained (as OpenAI's json_object)
        out = chat_openai.with_structured_output(City.model_json_schema(), method=method).invoke(
            "Describe Paris as a JSON object with keys name (string) and population (integer).")
        assert isinstance(out, dict)
        return
    out = chat_openai.with_structured_output(City, method=method).invoke("Describe Paris.")
    assert isinstance(out, City)


def test_langchain_bind_tools(chat_openai):
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return "sunny"

    message = chat_openai.bind_tools([get_weather], tool_choice="required").invoke("Weather in Paris?")
    assert message.tool_calls and all(c["name"] == "get_weather" for c in message.tool_calls)
    for call in message.tool_calls:
        jsonschema.validate(call["args"], WEATHER_ARGS)


# -- litellm -----------------------------------------------------------------------------------

@pytest.fixture
def litellm(server, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of its price list
    return pytest.importorskip("litellm")


def test_litellm_response_format_and_tools(litellm, server):
    common = dict(model="openai/onyx", api_base=server["base"] + "/v1", api_key="unused", max_tokens=64,
                  temperature=0)
    r = litellm.completion(messages=[{"role": "user", "content": "Describe Paris."}], response_format=City, **common)
    City.model_validate_json(r.choices[0].message.content)
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                                "parameters": WEATHER_ARGS}}
    r = litellm.completion(messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[weather],
                           tool_choice="required", **common)
    calls = r.choices[0].message.tool_calls
    assert calls and r.choices[0].finish_reason == "tool_calls"
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), WEATHER_ARGS)
    r = litellm.responses(model="openai/onyx", input="Describe Paris.", api_base=server["base"] + "/v1",
                          api_key="unused", max_output_tokens=64,
                          text={"format": {"type": "json_schema", "name": "city", "strict": True,
                                           "schema": City.model_json_schema() | {"additionalProperties": False}}})
    City.model_validate_json(r.output[0].content[0].text)
