// NotifierService.TestNotifier: a notifier.test event for this notifier alone, delivered like any.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { TestNotifierRequest, TestNotifierResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import * as validate from "../../validate.ts";

export function testNotifier(store: Store, wake: () => void) {
  return async (req: TestNotifierRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof TestNotifierResponseSchema>> => {
    const delivery = await store.notifications.test(validate.id(req.name, "name"));
    wake();
    await recordWrite(store, ctx, "notifier", req.name);
    return { delivery };
  };
}
