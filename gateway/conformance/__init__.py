"""`gateway conformance URL`: score how faithfully any OpenAI- or Anthropic-compatible gateway
passes truncation through (docs/conformance.md).

A loopback upstream (`gateway.conformance.upstream`) speaks OpenAI Chat, Anthropic Messages and
OpenAI Responses and plays a scripted case per model name (`conf-anthropic-max-tokens`); the
client (`gateway.conformance.client`) drives the gateway under test with raw HTTP and its own SSE
parser, and `gateway.conformance.judge` compares what each client format saw with the contract in
`gateway.conformance.expect`. Nothing here reads the gateway's own decoders or stop tables: the
tool must stay independent of what it judges, and `gateway serve` never imports it (only
`gateway.conformance.arguments`, which the command line needs for `--help`).
"""
