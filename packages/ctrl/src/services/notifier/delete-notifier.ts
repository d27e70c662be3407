// NotifierService.DeleteNotifier: its pending deliveries go with it.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { DeleteNotifierRequest, DeleteNotifierResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import * as validate from "../../validate.ts";

export function deleteNotifier(store: Store) {
  return async (req: DeleteNotifierRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof DeleteNotifierResponseSchema>> => {
    await store.notifications.delete(validate.id(req.name, "name"));
    await recordWrite(store, ctx, "notifier", req.name);
    return {};
  };
}
