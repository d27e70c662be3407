// metav1.Status failures, shaped exactly like the real API server's, so that
// client code that inspects `body.reason` / `body.code` behaves the same.
import type { ResourceType } from "./resources.ts";

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: { reason?: string; message: string; field?: string }[];
  retryAfterSeconds?: number;
}

export interface Status {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

const REASONS: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "Conflict",
  410: "Expired",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

export function reasonForCode(code: number): string {
  return REASONS[code] ?? (code >= 500 ? "InternalError" : "BadRequest");
}

/** An error that the HTTP layer turns into a Status response. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  /** Extra response headers, e.g. Retry-After. */
  readonly headers: Record<string, string>;

  constructor(code: number, message: string, opts: { reason?: string; details?: StatusDetails; headers?: Record<string, string> } = {}) {
    super(message);
    this.code = code;
    this.reason = opts.reason ?? reasonForCode(code);
    this.details = opts.details;
    this.headers = opts.headers ?? {};
  }

  toStatus(): Status {
    const status: Status = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      // The real server omits `details` for errors without a subject (e.g. bad selectors).
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
    return status;
  }
}

/** Identifies the object an error is about, as in `deployments.apps "web"`. */
export interface Subject {
  resource: string;
  group: string;
  name: string;
}

export function subjectOf(rt: ResourceType, name: string): Subject {
  return { resource: rt.resource, group: rt.group, name };
}

function qualified(s: Subject): string {
  return s.group ? `${s.resource}.${s.group}` : s.resource;
}

function details(s: Subject, extra: Partial<StatusDetails> = {}): StatusDetails {
  return { name: s.name, group: s.group, kind: s.resource, ...extra };
}

export function notFound(s: Subject): ApiError {
  return new ApiError(404, `${qualified(s)} "${s.name}" not found`, { details: details(s) });
}

export function alreadyExists(s: Subject): ApiError {
  return new ApiError(409, `${qualified(s)} "${s.name}" already exists`, { reason: "AlreadyExists", details: details(s) });
}

export function conflict(s: Subject, why: string): ApiError {
  return new ApiError(409, `Operation cannot be fulfilled on ${qualified(s)} "${s.name}": ${why}`, { details: details(s) });
}

/** 403, e.g. admission: `namespaces "default" is forbidden: this namespace may not be deleted` (apierrors.NewForbidden). */
export function forbidden(s: Subject, why: string, causes?: StatusDetails["causes"]): ApiError {
  return new ApiError(403, `${qualified(s)} "${s.name}" is forbidden: ${why}`, { details: details(s, causes ? { causes } : {}) });
}

export const STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again";

export interface FieldError {
  field: string;
  type: "Required value" | "Invalid value" | "Unsupported value" | "Forbidden";
  value?: unknown;
  detail: string;
}

const CAUSE_REASONS: Record<FieldError["type"], string> = {
  "Required value": "FieldValueRequired",
  "Invalid value": "FieldValueInvalid",
  "Unsupported value": "FieldValueNotSupported",
  Forbidden: "FieldValueForbidden",
};

function formatFieldError(e: FieldError): string {
  if (e.type === "Invalid value" || e.type === "Unsupported value") {
    return `${e.field}: ${e.type}: ${JSON.stringify(e.value)}: ${e.detail}`;
  }
  return `${e.field}: ${e.type}${e.detail ? `: ${e.detail}` : ""}`;
}

/** 422 Invalid, e.g. `Deployment.apps "Bad" is invalid: metadata.name: Invalid value: ...`. */
export function invalid(kind: string, group: string, name: string, errors: FieldError[]): ApiError {
  const qualifiedKind = group ? `${kind}.${group}` : kind;
  const messages = errors.map(formatFieldError);
  const summary = messages.length === 1 ? messages[0] : `[${messages.join(", ")}]`;
  return new ApiError(422, `${qualifiedKind} "${name}" is invalid: ${summary}`, {
    // Go's StatusDetails omits an empty name or group (omitempty).
    details: {
      ...(name ? { name } : {}),
      ...(group ? { group } : {}),
      kind,
      causes: errors.map((e, i) => ({ reason: CAUSE_REASONS[e.type], message: messages[i].slice(e.field.length + 2), field: e.field })),
    },
  });
}

/** 500 as apierrors.NewInternalError: the cause's message in details.causes. */
export function internalError(cause: string): ApiError {
  return new ApiError(500, `Internal error occurred: ${cause}`, { details: { causes: [{ message: cause }] } });
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, message);
}
