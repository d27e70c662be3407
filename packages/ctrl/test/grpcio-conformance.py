# Conformance as Python grpcio (gRPC C-core) sees ctrl. Run by conformance.test.ts with the
# target and an admin token; prints one JSON object of observations. Messages are written and
# read as raw protobuf bytes (no generated code needed).
import concurrent.futures
import json
import sys
import time

import grpc

target, token = sys.argv[1], sys.argv[2]
auth = [("authorization", "Bearer " + token)]
channel = grpc.insecure_channel(target)
seen = {}


def string_field(number, value):
    data = value.encode()
    return bytes([number << 3 | 2, len(data)]) + data


# Health/Watch of an unknown service: SERVICE_UNKNOWN (3), and the call stays open.
watch = channel.unary_stream("/grpc.health.v1.Health/Watch")(string_field(1, "no.such.Service"))
seen["health_first"] = list(next(watch))
time.sleep(0.5)
seen["health_open_after_500ms"] = watch.is_active()
watch.cancel()

# Reflection by file name, as declared in the descriptor.
def reflect(request):
    responses = channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")(iter([request]))
    return next(responses)

found = reflect(string_field(3, "ctrl/v1/region.proto"))
seen["reflection_by_filename_has_descriptor"] = b"ctrl/v1/region.proto" in found and bytes([4 << 3 | 2]) in found
missing = reflect(string_field(3, "ctrl/v1/nope.proto"))
seen["reflection_unknown_file_is_error"] = bytes([7 << 3 | 2]) in missing

# An unknown method: UNIMPLEMENTED.
try:
    channel.unary_unary("/ctrl.v1.Nope/Call")(b"", timeout=5)
    seen["unknown_method"] = "OK"
except grpc.RpcError as error:
    seen["unknown_method"] = error.code().name

# A watch of an idle region sends its headers before any message.
call = channel.unary_stream("/ctrl.v1.ClusterService/WatchDeploymentChanges")(string_field(1, "local"), metadata=auth)
with concurrent.futures.ThreadPoolExecutor(1) as pool:
    try:
        pool.submit(call.initial_metadata).result(timeout=5)
        seen["watch_headers_at_once"] = True
    except concurrent.futures.TimeoutError:
        seen["watch_headers_at_once"] = False
    call.cancel()

print(json.dumps(seen))
