/** The whole-turn body: the same verdict for every pending call. */
export function wholeTurnBody(turnDigest, approved, deciderUid, reason) {
    const body = { approved, turn_digest: turnDigest };
    if (deciderUid !== undefined) {
        body.decider_uid = deciderUid;
    }
    if (reason !== undefined) {
        body.reason = reason;
    }
    return body;
}
/** The per-call body. */
export function perCallBody(turnDigest, verdicts, deciderUid) {
    const calls = verdicts.map((verdict) => {
        if (!verdict.approved) {
            return verdict.reason === undefined
                ? { call_id: verdict.call_id, approved: false }
                : { call_id: verdict.call_id, approved: false, reason: verdict.reason };
        }
        if (verdict.arguments === undefined) {
            return { call_id: verdict.call_id, approved: true };
        }
        const text = typeof verdict.arguments === "string" ? verdict.arguments : JSON.stringify(verdict.arguments);
        return { call_id: verdict.call_id, approved: true, arguments: text };
    });
    const body = { turn_digest: turnDigest, calls };
    if (deciderUid !== undefined) {
        body.decider_uid = deciderUid;
    }
    return body;
}
//# sourceMappingURL=decisions.js.map