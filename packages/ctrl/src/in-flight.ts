// Unary calls whose handlers still run. A client that goes away does not stop its handler (a
// ReportObservedState transaction keeps going), so shutdown waits for them before the store
// closes under them; streams end on their own when shutdown aborts them.
import type { Interceptor } from "@connectrpc/connect";

export interface InFlightUnaryCalls {
  interceptor: Interceptor;
  /** Resolves once no unary handler runs (at once if none does). */
  idle(): Promise<void>;
}

export function inFlightUnaryCalls(): InFlightUnaryCalls {
  let running = 0;
  let waiters: (() => void)[] = [];
  const interceptor: Interceptor = (next) => async (req) => {
    if (req.stream) return next(req);
    running++;
    try {
      return await next(req);
    } finally {
      if (--running === 0) {
        for (const resolve of waiters) resolve();
        waiters = [];
      }
    }
  };
  const idle = () => (running === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve)));
  return { interceptor, idle };
}
