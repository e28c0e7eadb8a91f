/**
 * Verifies a webhook request the service sent (docs/design.md §10): the Standard Webhooks signature, checked by the
 * specification's own npm package `standardwebhooks` (signature over `{webhook-id}.{webhook-timestamp}.{body}`,
 * compared in constant time, timestamps more than 5 minutes off refused), and the body's `id` equal to the
 * `webhook-id` header, the key to deduplicate by (delivery is at least once).
 * @module
 */
import { Webhook, WebhookVerificationError } from "standardwebhooks";
export { WebhookVerificationError };
export class WebhookVerifier {
    #webhook;
    /** @param secret the `whsec_…` secret the subscription was created with. */
    constructor(secret) {
        this.#webhook = new Webhook(secret);
    }
    /**
     * The event, once `body` (the raw bytes or text as received, before any JSON parsing) and `headers` prove the
     * service sent it; throws {@link WebhookVerificationError} otherwise.
     */
    verify(body, headers) {
        const flat = flatten(headers);
        const event = this.#webhook.verify(body, flat);
        if (typeof event !== "object" || event === null || event.id !== flat["webhook-id"]) {
            throw new WebhookVerificationError("the body's id is not the webhook-id");
        }
        return event;
    }
}
/** Lower-case names, one value each; a header sent twice is not one the service sends, so it fails verification. */
function flatten(headers) {
    const flat = {};
    const entries = headers instanceof Headers ? headers.entries() : Object.entries(headers);
    for (const [name, value] of entries) {
        if (typeof value === "string") {
            flat[name.toLowerCase()] = value;
        }
    }
    return flat;
}
//# sourceMappingURL=webhooks.js.map