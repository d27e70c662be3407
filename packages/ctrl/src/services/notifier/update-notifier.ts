// NotifierService.UpdateNotifier: replaces its fields; the signing secret stays.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { UpdateNotifierRequest, UpdateNotifierResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import type { AddressPolicy } from "../../notifications/address.ts";
import { validNotifier } from "./valid-notifier.ts";

export function updateNotifier(store: Store, policy: AddressPolicy) {
  return async (req: UpdateNotifierRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof UpdateNotifierResponseSchema>> => {
    const notifier = await store.notifications.update(validNotifier(req.notifier, policy), req.validateOnly);
    if (!req.validateOnly) await recordWrite(store, ctx, "notifier", notifier.name);
    return { notifier };
  };
}
