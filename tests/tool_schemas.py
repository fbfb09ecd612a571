"""Twenty-two OpenAI function tools for the tool-calling tests: nested objects, enums, arrays,
optional arguments, patterns and formats, a function without arguments. (Number bounds are not
compiled yet, so these schemas do without them.)"""

from __future__ import annotations


def _fn(name: str, description: str, properties: dict, required: list[str], **extra) -> dict:
    params = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": params, "strict": True, **extra}}


S = {"type": "string"}
TOOLS: list[dict] = [
    _fn("get_weather", "Current weather in a city",
        {"city": S, "unit": {"enum": ["celsius", "fahrenheit"]}}, ["city"]),
    _fn("search_web", "Search the web", {"query": S, "limit": {"type": "integer"}}, ["query"]),
    _fn("send_email", "Send an email",
        {"to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1, "maxItems": 3}, "subject": S, "body": S,
         "cc": {"type": "array", "items": S, "maxItems": 2}}, ["to", "subject", "body"]),
    _fn("create_event", "Add a calendar event",
        {"title": S, "start": {"type": "string", "format": "date-time"}, "duration_minutes": {"type": "integer"},
         "attendees": {"type": "array", "maxItems": 3, "items": {
             "type": "object", "properties": {"name": S, "email": S}, "required": ["name"],
             "additionalProperties": False}}}, ["title", "start"]),
    _fn("set_thermostat", "Set the thermostat", {"temperature": {"type": "number"},
                                                 "mode": {"enum": ["heat", "cool", "auto"]}}, ["temperature", "mode"]),
    _fn("book_flight", "Book a flight",
        {"origin": {"type": "string", "pattern": "^[A-Z]{3}$"}, "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
         "date": {"type": "string", "format": "date"},
         "passengers": {"type": "object", "properties": {"adults": {"type": "integer"}, "children": {"type": "integer"}},
                        "required": ["adults"], "additionalProperties": False}}, ["origin", "destination", "date"]),
    _fn("calculate", "Evaluate an arithmetic expression", {"expression": S}, ["expression"]),
    _fn("translate", "Translate text", {"text": S, "target": {"enum": ["fr", "de", "es", "ja", "zh"]}},
        ["text", "target"]),
    _fn("add_todo", "Add a to-do item",
        {"item": S, "priority": {"enum": ["low", "medium", "high"]},
         "tags": {"type": "array", "items": S, "maxItems": 3}}, ["item"]),
    _fn("get_stock_price", "Latest price of a stock", {"symbol": {"type": "string", "pattern": "^[A-Z]{1,5}$"}}, ["symbol"]),
    _fn("resize_image", "Resize an image",
        {"url": {"type": "string", "format": "uri"}, "width": {"type": "integer"}, "height": {"type": "integer"}, "keep_aspect": {"type": "boolean"}},
        ["url", "width", "height"]),
    _fn("query_database", "Query a table",
        {"table": {"enum": ["users", "orders", "products"]},
         "filters": {"type": "array", "maxItems": 2, "items": {
             "type": "object", "properties": {"column": S, "op": {"enum": ["=", "<", ">"]},
                                              "value": {"type": ["string", "number"], "maxLength": 12}},
             "required": ["column", "op", "value"], "additionalProperties": False}},
         "limit": {"type": "integer"}}, ["table"]),
    _fn("set_light", "Switch a light",
        {"room": {"enum": ["kitchen", "bedroom", "hall"]}, "on": {"type": "boolean"},
         "brightness": {"type": "integer"}}, ["room", "on"]),
    _fn("create_user", "Create a user account",
        {"user": {"type": "object", "additionalProperties": False, "required": ["name", "address"], "properties": {
            "name": S, "age": {"type": "integer"},
            "address": {"type": "object", "properties": {"street": S, "city": S, "zip": {"type": "string", "maxLength": 8}},
                        "required": ["city"], "additionalProperties": False},
            "roles": {"type": "array", "items": {"enum": ["admin", "editor", "viewer"]}, "maxItems": 3}}}},
        ["user"]),
    _fn("play_music", "Play music", {"artist": S, "song": S, "shuffle": {"type": "boolean"}}, []),
    _fn("get_time", "The current time", {}, []),
    _fn("convert_currency", "Convert money",
        {"amount": {"type": "number"}, "source": {"enum": ["USD", "EUR", "JPY"]},
         "target": {"enum": ["USD", "EUR", "JPY"]}}, ["amount", "source", "target"]),
    _fn("schedule_reminder", "Remind me later",
        {"text": S, "at": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}, "repeat": {"enum": ["none", "daily", "weekly"]}},
        ["text", "at"]),
    _fn("order_pizza", "Order a pizza",
        {"size": {"enum": ["small", "medium", "large"]},
         "toppings": {"type": "array", "items": {"enum": ["cheese", "ham", "olives", "basil"]}, "maxItems": 4},
         "delivery": {"type": "object", "properties": {"address": S, "phone": {"type": "string", "maxLength": 12}},
                      "required": ["address"], "additionalProperties": False}}, ["size"]),
    _fn("run_code", "Run a snippet", {"language": {"enum": ["python", "javascript"]}, "code": S,
                                      "timeout": {"type": "number"}}, ["language", "code"]),
    _fn("update_settings", "Change settings",
        {"settings": {"type": "object", "additionalProperties": False, "properties": {
            "theme": {"enum": ["light", "dark"]},
            "notifications": {"type": "object", "properties": {"email": {"type": "boolean"}, "sms": {"type": "boolean"}},
                              "required": ["email", "sms"], "additionalProperties": False}}}}, ["settings"]),
    _fn("get_route", "Directions through waypoints",
        {"waypoints": {"type": "array", "minItems": 2, "maxItems": 3, "items": {
            "type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"], "additionalProperties": False}},
         "mode": {"const": "driving"}}, ["waypoints", "mode"]),
]
