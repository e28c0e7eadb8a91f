/** The whole-turn body: the same verdict for every pending call. */
export function wholeTurnBody(turnDigest, approved, deciderUid, reason, remember = {}) {
    const body = { approved, turn_digest: turnDigest };
    if (deciderUid !== undefined) {
        body.decider_uid = deciderUid;
    }
    if (reason !== undefined) {
        body.reason = reason;
    }
    if (remember.remember !== undefined) {
        body.remember = remember.remember;
    }
    return withRememberUntil(body, remember.rememberUntil);
}
/** The per-call body. */
export function perCallBody(turnDigest, verdicts, deciderUid, rememberUntil) {
    const calls = verdicts.map((verdict) => {
        const call = { call_id: verdict.call_id, approved: verdict.approved };
        if (!verdict.approved && verdict.reason !== undefined) {
            call.reason = verdict.reason;
        }
        if (verdict.approved && verdict.arguments !== undefined) {
            call.arguments =
                typeof verdict.arguments === "string" ? verdict.arguments : JSON.stringify(verdict.arguments);
        }
        if (verdict.remember !== undefined) {
            call.remember = verdict.remember;
        }
        return call;
    });
    const body = { turn_digest: turnDigest, calls };
    if (deciderUid !== undefined) {
        body.decider_uid = deciderUid;
    }
    // The service takes one end for the whole decision, beside `calls`, for every verdict remembered `owner`.
    return withRememberUntil(body, rememberUntil);
}
function withRememberUntil(body, until) {
    if (until !== undefined) {
        body.remember_until = typeof until === "string" ? until : until.toISOString();
    }
    return body;
}
//# sourceMappingURL=decisions.js.map