/**
 * Verifies a webhook request the service sent (docs/design.md §10): the Standard Webhooks signature, checked by the
 * specification's own npm package `standardwebhooks` (signature over `{webhook-id}.{webhook-timestamp}.{body}`,
 * compared in constant time, timestamps more than 5 minutes off refused), and the body's `id` equal to the
 * `webhook-id` header, the key to deduplicate by (delivery is at least once).
 * @module
 */
import { Webhook, WebhookVerificationError } from "standardwebhooks";

import type { Event } from "./schemas.js";

export { WebhookVerificationError };

/** Request headers as Node's `IncomingMessage.headers`, a plain record, or a fetch `Headers`. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export class WebhookVerifier {
    readonly #webhook: Webhook;

    /** @param secret the `whsec_…` secret the subscription was created with. */
    constructor(secret: string) {
        this.#webhook = new Webhook(secret);
    }

    /**
     * The event, once `body` (the raw bytes or text as received, before any JSON parsing) and `headers` prove the
     * service sent it; throws {@link WebhookVerificationError} otherwise.
     */
    verify(body: string | Uint8Array, headers: WebhookHeaders): Event {
        const flat = flatten(headers);
        const event = this.#webhook.verify(body, flat);
        if (typeof event !== "object" || event === null || (event as { id?: unknown }).id !== flat["webhook-id"]) {
            throw new WebhookVerificationError("the body's id is not the webhook-id");
        }
        return event as Event;
    }
}

/** Lower-case names, one value each; a header sent twice is not one the service sends, so it fails verification. */
function flatten(headers: WebhookHeaders): Record<string, string> {
    const flat: Record<string, string> = {};
    const entries = headers instanceof Headers ? headers.entries() : Object.entries(headers);
    for (const [name, value] of entries) {
        if (typeof value === "string") {
            flat[name.toLowerCase()] = value;
        }
    }
    return flat;
}
