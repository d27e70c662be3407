// The bounds of the agent's Kubernetes client (flags --kube-max-connections, --kube-credentials-recheck and
// --kube-idle-timeout), apart from the client so that the flags table does not load it.

/**
 * Connections one process opens to one API server at most. Over HTTP/1.1 each request in
 * flight holds one and each watch holds one for its whole life: the agent's workers (8 by
 * default), its 3 watches, leader election and a prune's list fit well within it; requests
 * beyond it wait for a free connection rather than open more.
 */
export const KUBE_MAX_CONNECTIONS = 32;

/**
 * A request without a byte from or to the API server for this long fails: undici's header and
 * body timeouts, which @kubernetes/client-node had. A watch receives a bookmark every minute.
 */
export const KUBE_IDLE_TIMEOUT_MS = 300_000;

/**
 * The credential files (token, CA, client certificate and key) are read again at most once a
 * second, not before every request: a restart of 100,000 resources makes some 200,000
 * requests. A rotation is used within a second (client-go re-reads a token file every minute).
 */
export const KUBE_CREDENTIALS_RECHECK_MS = 1000;
