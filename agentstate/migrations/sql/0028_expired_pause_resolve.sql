-- 0028: resolving a pause that is pending past its expiry is refused naming it
-- expired, swept or not (it named it pending).

CREATE OR REPLACE FUNCTION agentstate_resolve(
    p_chat text, p_call text, p_reach_user bigint, p_reach_name text, p_user_id bigint,
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    pause agentstate_pausedrun := agentstate_reached_pause(
        p_chat, p_call, p_reach_user, p_reach_name);
BEGIN
    IF pause.status <> 'claimed' THEN  -- a pending pause past its expiry is expired
        RETURN agentstate_refuse('NotClaimed', jsonb_build_object('status',
            CASE WHEN pause.status = 'pending' AND pause.expires_at <= now() THEN 'expired'
                 ELSE pause.status END));
    END IF;
    UPDATE agentstate_pausedrun SET status = 'resolved', resolved_at = now()
    WHERE id = pause.id
    RETURNING * INTO pause;
    RETURN agentstate_pause_changed(pause, 'pause.resolved', p_user_id, p_actor);
END $$;
