// ctrl.v1.NotifierService: notifiers and their deliveries (docs/guides/notifications.md). One
// RPC per file under notifier/; delivery itself is the dispatcher's (notifications/).
import type { ServiceImpl } from "@connectrpc/connect";
import type { NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import type { AddressPolicy } from "../notifications/address.ts";
import { createNotifier } from "./notifier/create-notifier.ts";
import { deleteNotifier } from "./notifier/delete-notifier.ts";
import { getNotifier } from "./notifier/get-notifier.ts";
import { listDeliveries } from "./notifier/list-deliveries.ts";
import { listNotifiers } from "./notifier/list-notifiers.ts";
import { rotateNotifierSecret } from "./notifier/rotate-notifier-secret.ts";
import { testNotifier } from "./notifier/test-notifier.ts";
import { updateNotifier } from "./notifier/update-notifier.ts";

/** `wake`: a new delivery was written by this replica (the dispatcher looks at once). */
export function notifierService(store: Store, policy: AddressPolicy, wake: () => void): ServiceImpl<typeof NotifierService> {
  return {
    createNotifier: createNotifier(store, policy),
    getNotifier: getNotifier(store),
    listNotifiers: listNotifiers(store),
    updateNotifier: updateNotifier(store, policy),
    deleteNotifier: deleteNotifier(store),
    rotateNotifierSecret: rotateNotifierSecret(store),
    testNotifier: testNotifier(store, wake),
    listDeliveries: listDeliveries(store),
  };
}
