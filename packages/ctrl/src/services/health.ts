// grpc.health.v1 Health: SERVING while the process accepts work, NOT_SERVING once it drains.
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "@flotilla/proto/grpc/health/v1/health_pb.js";

export function healthService(serviceNames: ReadonlySet<string>, draining: AbortSignal): ServiceImpl<typeof Health> {
  const known = (service: string) => service === "" || serviceNames.has(service);
  const status = () => (draining.aborted ? Status.NOT_SERVING : Status.SERVING);
  return {
    check(req) {
      if (!known(req.service)) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
      return { status: status() };
    },
    // As the gRPC health protocol asks: an unknown service is SERVICE_UNKNOWN and the call
    // stays open (a service that appears later would be reported then; ours never change).
    async *watch(req, ctx) {
      const serving = known(req.service);
      yield { status: serving ? status() : Status.SERVICE_UNKNOWN };
      if (draining.aborted) return;
      await new Promise<void>((resolve) => {
        draining.addEventListener("abort", () => resolve(), { once: true });
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (draining.aborted && serving) yield { status: Status.NOT_SERVING };
    },
  };
}
