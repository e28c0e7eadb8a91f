/**
 * Verifies a webhook request the service sent (docs/design.md §10): the Standard Webhooks signature, checked by the
 * specification's own npm package `standardwebhooks` (signature over `{webhook-id}.{webhook-timestamp}.{body}`,
 * compared in constant time, timestamps more than 5 minutes off refused), and the body's `id` equal to the
 * `webhook-id` header, the key to deduplicate by (delivery is at least once).
 * @module
 */
import { WebhookVerificationError } from "standardwebhooks";
import type { Event } from "./schemas.js";
export { WebhookVerificationError };
/** Request headers as Node's `IncomingMessage.headers`, a plain record, or a fetch `Headers`. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;
export declare class WebhookVerifier {
    #private;
    /** @param secret the `whsec_…` secret the subscription was created with. */
    constructor(secret: string);
    /**
     * The event, once `body` (the raw bytes or text as received, before any JSON parsing) and `headers` prove the
     * service sent it; throws {@link WebhookVerificationError} otherwise.
     */
    verify(body: string | Uint8Array, headers: WebhookHeaders): Event;
}
//# sourceMappingURL=webhooks.d.ts.map