// NotifierService.GetNotifier: never its signing secret.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GetNotifierRequest, GetNotifierResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import * as validate from "../../validate.ts";

export function getNotifier(store: Store) {
  return async (req: GetNotifierRequest): Promise<MessageInitShape<typeof GetNotifierResponseSchema>> => ({
    notifier: await store.notifications.get(validate.id(req.name, "name")),
  });
}
