// grpc.health.v1 Health: SERVING while the process accepts work, NOT_SERVING once it drains.
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@flotilla/proto/grpc/health/v1/health_pb.js";

export function healthService(serviceNames: ReadonlySet<string>, draining: AbortSignal): ServiceImpl<typeof Health> {
  const status = (service: string) => {
    if (service !== "" && !serviceNames.has(service)) throw new ConnectError(`unknown service ${service}`, Code.NotFound);
    return draining.aborted ? Status.NOT_SERVING : Status.SERVING;
  };
  return {
    check: (req) => ({ status: status(req.service) }),
    async *watch(req, ctx) {
      yield { status: status(req.service) };
      if (draining.aborted) return;
      await new Promise<void>((resolve) => {
        draining.addEventListener("abort", () => resolve(), { once: true });
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (draining.aborted) yield { status: Status.NOT_SERVING };
    },
  };
}
