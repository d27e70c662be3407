// NotifierService.CreateNotifier: the notifier, and its signing secret, shown in this answer only.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { CreateNotifierRequest, CreateNotifierResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import type { AddressPolicy } from "../../notifications/address.ts";
import { validNotifier } from "./valid-notifier.ts";

export function createNotifier(store: Store, policy: AddressPolicy) {
  return async (req: CreateNotifierRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof CreateNotifierResponseSchema>> => {
    const { notifier, secret } = await store.notifications.create(validNotifier(req.notifier, policy), req.validateOnly);
    if (!req.validateOnly) await recordWrite(store, ctx, "notifier", notifier.name);
    return { notifier, signingSecret: secret };
  };
}
