"""Attribute names written on spans.

The ``gen_ai.*`` names follow the OpenTelemetry GenAI semantic conventions; the ``rewind.*``
names carry the exchange itself so that a trace can be replayed byte for byte.
"""

from __future__ import annotations

# GenAI semantic conventions.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
TEMPERATURE = "gen_ai.request.temperature"
TOP_P = "gen_ai.request.top_p"
TOP_K = "gen_ai.request.top_k"
MAX_TOKENS = "gen_ai.request.max_tokens"
SEED = "gen_ai.request.seed"
FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
CHOICE_COUNT = "gen_ai.request.choice.count"
STOP_SEQUENCES = "gen_ai.request.stop_sequences"
ENCODING_FORMATS = "gen_ai.request.encoding_formats"
EMBEDDING_DIMENSIONS = "gen_ai.embeddings.dimension.count"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
OUTPUT_TYPE = "gen_ai.output.type"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_DESCRIPTION = "gen_ai.agent.description"
AGENT_VERSION = "gen_ai.agent.version"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
OPENAI_API_TYPE = "openai.api.type"
OPENAI_REQUEST_SERVICE_TIER = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER = "openai.response.service_tier"
OPENAI_SYSTEM_FINGERPRINT = "openai.response.system_fingerprint"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

# Exchange attributes (DESIGN section 4).
STEP = "rewind.step"
KIND = "rewind.kind"
REQUEST_METHOD = "rewind.request.method"
REQUEST_URL = "rewind.request.url"
REQUEST_HEADERS = "rewind.request.headers"
REQUEST_BODY = "rewind.request.body"
RESPONSE_STATUS = "rewind.response.status"
RESPONSE_HEADERS = "rewind.response.headers"
RESPONSE_BODY = "rewind.response.body"
RESPONSE_EVENTS = "rewind.response.events"
REQUEST_BODY_ENCODING = "rewind.request.body_encoding"
RESPONSE_BODY_ENCODING = "rewind.response.body_encoding"
MATCH_KEY = "rewind.match_key"
# The version of the canonical form the key was made with (canonical.MATCH_KEY_VERSION).
MATCH_KEY_VERSION = "rewind.match_key.version"
CAPTURE_ERROR = "rewind.capture_error"
RESPONSE_INCOMPLETE = "rewind.response.incomplete"  # why the body stops early, when it does
# False on a streamed call whose stream carried no token counts (e.g. OpenAI without
# stream_options.include_usage): its tokens and cost are "not reported", not 0.
USAGE_REPORTED = "rewind.usage.reported"
TOOL_REPLAYED = "rewind.tool.replayed"
REPLAY_SOURCE_TRACE_ID = "rewind.replay.source_trace_id"
TOOL_ARGUMENTS = "rewind.tool.arguments"
TOOL_RESULT = "rewind.tool.result"
TOOL_ERROR = "rewind.tool.error"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
FORK_SOURCE_TRACE_ID = "rewind.fork.source_trace_id"
FORK_STEP = "rewind.fork.step"
LINK_KIND = "rewind.link"  # on a span link: why it links (a fork to its source step)
FORK_EDITS = "rewind.fork.edits"
# An evaluator's verdict on a run (``rewind suite run``): an event on the replayed run's span.
EVALUATION_RESULT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
SUITE_NAME = "rewind.suite.name"  # on a suite run's span: the suite it belongs to
TENANT = "rewind.tenant"  # resource attribute: the tenant of the token the spans came with
# Resource attributes (OpenTelemetry process conventions): the command that ran the service,
# as one line and as its argv (an array, stored as JSON).
PROCESS_COMMAND_LINE = "process.command_line"
PROCESS_COMMAND_ARGS = "process.command_args"
# Resource attribute: the HMAC that ``rewind record`` puts beside the argv it saves, with a key
# kept on the recording machine; only a command it signs there replays without being asked for.
COMMAND_SIGNATURE = "rewind.command.signature"
# Resource attribute of spans recorded by the proxy (``rewind proxy``, ``rewind record --proxy``):
# JSON {endpoint prefix: upstream base URL}; a replay of the run goes through the proxy too.
PROXY_UPSTREAMS = "rewind.proxy.upstreams"
# Resource attribute of a run recorded with HTTPS interception (``rewind record --intercept``):
# JSON {host: endpoint prefix}; a replay of the run intercepts those hosts again.
PROXY_INTERCEPT = "rewind.proxy.intercept"
# Never exported: what the export thread still has to derive ("request,response").
ENRICH = "rewind.enrich"

# The inbound exchange of a unit of work (DESIGN section 4, "The unit of work"), on the root span
# of a request's trace (an ASGI or WSGI app) or of a job's (a function run per job).
INBOUND_KIND = "rewind.inbound.kind"  # "request" or "job"
INBOUND_METHOD = "rewind.inbound.method"
INBOUND_ROUTE = "rewind.inbound.route"  # the app's route template when the framework names one
INBOUND_PATH = "rewind.inbound.path"
INBOUND_QUERY = "rewind.inbound.query"  # credentials masked, as outbound URLs
INBOUND_REQUEST_HEADERS = "rewind.inbound.request.headers"  # JSON, allow-listed
INBOUND_REQUEST_BODY = "rewind.inbound.request.body"
INBOUND_REQUEST_BODY_ENCODING = "rewind.inbound.request.body_encoding"
INBOUND_STATUS = "rewind.inbound.response.status"
INBOUND_RESPONSE_HEADERS = "rewind.inbound.response.headers"  # JSON, allow-listed
INBOUND_RESPONSE_BODY = "rewind.inbound.response.body"
INBOUND_RESPONSE_BODY_ENCODING = "rewind.inbound.response.body_encoding"
INBOUND_RESPONSE_EVENTS = "rewind.inbound.response.events"  # a streamed response, as outbound
INBOUND_APP = "rewind.inbound.app"  # module:attr of the app or job function, when known
INBOUND_ARGUMENTS = "rewind.inbound.arguments"  # a job's arguments (JSON)
INBOUND_RESULT = "rewind.inbound.result"  # a job's return value (JSON)
INBOUND_ERROR = "rewind.inbound.error"  # a job's exception: JSON {type, module, message}
INBOUND_KIND_REQUEST = "request"
INBOUND_KIND_JOB = "job"

KIND_LLM = "llm"
KIND_TOOL = "tool"
KIND_HTTP = "http"  # any other outbound HTTP call of the run (a tool's API, a search service)
KIND_DB = "db"  # a call to a database (PostgreSQL, Redis)
KIND_RPC = "rpc"  # a remote procedure call (gRPC) of the run

# OpenTelemetry database client semantic conventions, on the spans of database calls; the
# parameters apart from the query text, and what came back, in rewind.db.* (JSON, tagged
# values: exporter/databases/values.py).
DB_SYSTEM_NAME = "db.system.name"  # "postgresql", "redis"
DB_QUERY_TEXT = "db.query.text"
DB_OPERATION_NAME = "db.operation.name"
DB_NAMESPACE = "db.namespace"
DB_RESPONSE_STATUS = "db.response.status_code"  # SQLSTATE, Redis error prefix
DB_PARAMETERS = "rewind.db.parameters"
DB_RESULT = "rewind.db.result"  # rows and their columns, or the reply
DB_ERROR = "rewind.db.error"  # JSON {type, module, message}
DB_REPLAYED = "rewind.db.replayed"

# OpenTelemetry RPC client semantic conventions, on the spans of gRPC calls (named
# ``{service}/{method}``). The messages are the bytes the call's own serializers made, base64 in
# rewind.request.body / rewind.response.body, a server stream's as rewind.response.events
# ([offset_ms, base64 message] each); metadata allow-listed in rewind.request.headers and
# rewind.response.headers (initial metadata).
RPC_SYSTEM = "rpc.system"  # "grpc"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
RPC_GRPC_STATUS_CODE = "rpc.grpc.status_code"  # the status code's number (0: OK)
RPC_REQUEST_TYPE = "rewind.rpc.request.type"  # the message type's full name, when known
RPC_RESPONSE_TYPE = "rewind.rpc.response.type"
RPC_ERROR = "rewind.rpc.error"  # JSON {code, details}: the status a failed call ended with

# OpenTelemetry HTTP client semantic conventions, on the spans of other HTTP calls.
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_RESPONSE_STATUS = "http.response.status_code"
URL_FULL = "url.full"
HTTP_URL = "http.url"  # the conventions before 1.21, still written by many instrumentations
HTTP_TARGET = "http.target"  # (path and query of a server span)
# ... and the HTTP server conventions, on the root span of a request's trace.
HTTP_ROUTE = "http.route"
URL_PATH = "url.path"
URL_QUERY = "url.query"

# gen_ai.operation.name values that are one call to a model (one row each in rewind_llm_calls).
LLM_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings", "responses")
OPERATION_EXECUTE_TOOL = "execute_tool"
# Operations that all name one call generating content, whatever an instrumentation calls it
# (ADK's span is generate_content whatever the model's provider; OpenLLMetry's legacy
# completion is "completion"): one call for the one-call rule.
GENERATION_OPERATIONS = ("chat", "text_completion", "generate_content", "responses", "completion")

# Read, never written: what other and older instrumentations put on their spans.
SYSTEM = "gen_ai.system"  # the provider, before gen_ai.provider.name
LLM_REQUEST_TYPE = "llm.request.type"  # OpenLLMetry's operation ("completion" for legacy calls)
PROMPT_PREFIX = "gen_ai.prompt."  # flattened messages: gen_ai.prompt.{i}.{field}
COMPLETION_PREFIX = "gen_ai.completion."  # gen_ai.completion.{i}.{field}
REQUEST_PREFIX = "gen_ai.request."  # the request parameters (model, temperature ...)
# Per-message span events (names of events, not of attributes) and the role each stands for.
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
# The current conventions' event (a log record) with a call's whole content in its attributes.
OPERATION_DETAILS_EVENT = "gen_ai.client.inference.operation.details"

# OpenInference (Arize Phoenix's instrumentations), read at intake into the names above.
OI_SPAN_KIND = "openinference.span.kind"  # LLM, EMBEDDING, TOOL, AGENT, CHAIN, ...
OI_INPUT_VALUE = "input.value"  # the call's input; the provider's request JSON when mime is JSON
OI_INPUT_MIME = "input.mime_type"
OI_OUTPUT_VALUE = "output.value"
OI_OUTPUT_MIME = "output.mime_type"
OI_MODEL_NAME = "llm.model_name"
OI_PROVIDER = "llm.provider"
OI_SYSTEM = "llm.system"
OI_INVOCATION_PARAMETERS = "llm.invocation_parameters"  # JSON
OI_INPUT_MESSAGES = "llm.input_messages."  # llm.input_messages.{i}.message.{field}
OI_OUTPUT_MESSAGES = "llm.output_messages."
OI_TOOLS = "llm.tools."  # llm.tools.{i}.tool.json_schema
OI_PROMPTS = "llm.prompts"  # a completion's prompts (llm.prompts.{i}...)
OI_TOKEN_COUNTS = "llm.token_count."  # every count below
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_CACHE_READ_TOKENS = "llm.token_count.prompt_details.cache_read"
OI_REASONING_TOKENS = "llm.token_count.completion_details.reasoning"
OI_FINISH_REASON = "llm.finish_reason"
OI_EMBEDDING_MODEL = "embedding.model_name"
OI_TOOL_NAME = "tool.name"
OI_TOOL_PARAMETERS = "tool.parameters"
OI_TOOL_CALL_ID = "tool_call.id"
OI_AGENT_NAME = "agent.name"
OI_SESSION_ID = "session.id"
# OpenLLMetry's (traceloop) decorators: @workflow, @agent, @task, @tool spans.
TL_SPAN_KIND = "traceloop.span.kind"
TL_ENTITY_NAME = "traceloop.entity.name"
TL_WORKFLOW_NAME = "traceloop.workflow.name"
# The Vercel AI SDK's telemetry (``ai`` npm package, experimental_telemetry), read at intake:
# ``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` are one call each (inside an
# ``ai.generateText`` / ``ai.streamText`` span for the whole tool loop), ``ai.toolCall`` a tool.
AI_OPERATION_ID = "ai.operationId"
AI_MODEL_ID = "ai.model.id"
AI_MODEL_PROVIDER = "ai.model.provider"  # "openai.chat", "openai.responses", "anthropic.messages"
AI_PROMPT_MESSAGES = "ai.prompt.messages"  # JSON: the SDK's own prompt (parts: text, tool-call)
AI_PROMPT_TOOLS = "ai.prompt.tools"  # JSON list of JSON strings {type, name, inputSchema}
AI_RESPONSE_TEXT = "ai.response.text"
AI_RESPONSE_TOOL_CALLS = "ai.response.toolCalls"  # JSON [{toolCallId, toolName, input}]
AI_RESPONSE_FINISH_REASON = "ai.response.finishReason"  # "stop", "tool-calls", ...
AI_RESPONSE_MODEL = "ai.response.model"
AI_USAGE_INPUT_TOKENS = ("ai.usage.inputTokens", "ai.usage.promptTokens")  # now, before v5
AI_USAGE_OUTPUT_TOKENS = ("ai.usage.outputTokens", "ai.usage.completionTokens")
AI_USAGE_CACHED_INPUT_TOKENS = "ai.usage.cachedInputTokens"
AI_USAGE_REASONING_TOKENS = "ai.usage.reasoningTokens"
AI_TOOL_CALL_NAME = "ai.toolCall.name"
AI_TOOL_CALL_ID = "ai.toolCall.id"
AI_TOOL_CALL_ARGS = ("ai.toolCall.args", "ai.toolCall.input")
AI_TOOL_CALL_RESULT = ("ai.toolCall.result", "ai.toolCall.output")
OPERATION_INVOKE_AGENT = "invoke_agent"
# A coordinated run of several agents (GenAI conventions: INTERNAL, named by gen_ai.agent.name;
# gen_ai.workflow.name before the conventions merged it into the agent span).
OPERATION_INVOKE_WORKFLOW = "invoke_workflow"
WORKFLOW_NAME = "gen_ai.workflow.name"

# What each capture mode leaves out (see config.CaptureMode).
RAW_ATTRIBUTES = frozenset(
    {REQUEST_BODY, RESPONSE_BODY, RESPONSE_EVENTS, TOOL_ARGUMENTS, TOOL_RESULT, TOOL_ERROR,
     INBOUND_REQUEST_BODY, INBOUND_RESPONSE_BODY, INBOUND_RESPONSE_EVENTS, INBOUND_ARGUMENTS,
     INBOUND_RESULT, INBOUND_ERROR, DB_PARAMETERS, DB_RESULT, DB_ERROR, RPC_ERROR}
)
CONTENT_ATTRIBUTES = frozenset(
    {
        SYSTEM_INSTRUCTIONS,
        INPUT_MESSAGES,
        OUTPUT_MESSAGES,
        TOOL_DEFINITIONS,
        TOOL_CALL_ARGUMENTS,
        TOOL_CALL_RESULT,
    }
)
