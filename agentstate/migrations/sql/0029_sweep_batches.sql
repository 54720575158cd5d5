-- 0029: each batch of the sweep changes its rows, and their dependent rows, by the
-- batch's ids (= ANY of an array: an index lookup each), never by a join with the
-- batch, which the planner answered with a hash of the whole table wherever the
-- table was not much larger than a batch: every batch read it all again. The
-- approval requests' expiry reads each one's run by its id. The store's expired
-- items are found by scope then name from where the last batch ended, so that a
-- sweep reads each item once (it read every item that is not expired each batch).

CREATE OR REPLACE FUNCTION agentstate_expire_approval_requests(
    p_size integer, p_ttl interval, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_approvalrequest
        WHERE status = 'pending' AND deadline IS NULL AND created_at <= now() - p_ttl
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_approvalrequest request SET status = 'expired'
        WHERE request.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING request.id, request.run_id, request.created_by_id, request.tool_name,
                  request.call_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'approval.expired', p_actor, NULL, 'approvalrequest', expired.id::text,
               expired.created_by_id, '',
               jsonb_build_object(
                   'run_id', (SELECT run.run_id FROM agentstate_run run
                              WHERE run.id = expired.run_id),
                   'tool_name', expired.tool_name, 'call_id', expired.call_id),
               now()
        FROM expired
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', count(*), 'events', coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]'))
    FROM logged
$$;

CREATE OR REPLACE FUNCTION agentstate_purge_pauses(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_pausedrun
        WHERE (status = 'resolved' AND resolved_at < now() - p_retention)
           OR (status = 'expired' AND expires_at < now() - p_retention)
        LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), purged AS (
        DELETE FROM agentstate_pausedrun pause WHERE pause.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING pause.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;

CREATE OR REPLACE FUNCTION agentstate_purge_events(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_event WHERE created_at < now() - p_retention
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), attempts AS (
        DELETE FROM agentstate_deliveryattempt attempt
        WHERE attempt.delivery_id = ANY (ARRAY(
            SELECT delivery.id FROM agentstate_delivery delivery
            WHERE delivery.event_id = ANY (ARRAY(SELECT id FROM batch))))
    ), deliveries AS (
        DELETE FROM agentstate_delivery delivery
        WHERE delivery.event_id = ANY (ARRAY(SELECT id FROM batch))
    ), purged AS (
        DELETE FROM agentstate_event event WHERE event.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING event.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;

CREATE OR REPLACE FUNCTION agentstate_purge_threads(p_size integer, p_ttl interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_thread
        WHERE updated_at < now() - p_ttl - interval '1 minute'
        ORDER BY updated_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), writes AS (
        DELETE FROM agentstate_checkpointwrite w
        WHERE w.thread_id = ANY (ARRAY(SELECT id FROM batch))
    ), blobs AS (
        DELETE FROM agentstate_checkpointblob b
        WHERE b.thread_id = ANY (ARRAY(SELECT id FROM batch))
    ), checkpoints AS (
        DELETE FROM agentstate_checkpoint c WHERE c.thread_id = ANY (ARRAY(SELECT id FROM batch))
    ), gone AS (
        DELETE FROM agentstate_thread t WHERE t.id = ANY (ARRAY(SELECT id FROM batch)) RETURNING 1
    )
    SELECT jsonb_build_object('count', count(*)) FROM gone
$$;

DROP FUNCTION agentstate_purge_store_items(integer, text, double precision);

CREATE FUNCTION agentstate_purge_store_items(
    p_size integer, p_prefix text, p_now double precision, p_after_scope bigint,
    p_after_name text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    sid bigint;
    from_name text;  -- the item the scope is read after ('': its first; names are never '')
    found bigint[];
    last_name text;
    ids bigint[] := '{}';
    resume jsonb;  -- where the next batch starts: none once the items are read to the end
BEGIN
    FOR sid IN
        SELECT s.id FROM agentstate_scope s
        WHERE s.owner_id IS NULL AND starts_with(s.key, p_prefix)
          AND s.id >= coalesce(p_after_scope, 0)
        ORDER BY s.id
    LOOP
        from_name := CASE WHEN sid = p_after_scope THEN p_after_name ELSE '' END;
        SELECT coalesce(array_agg(v.id ORDER BY v.name), '{}'), max(v.name)
        INTO found, last_name
        FROM (
            SELECT v.id, v.name FROM agentstate_variable v
            WHERE v.scope_id = sid AND v.name > from_name
              AND jsonb_typeof(v.value -> 'expires_at') = 'number'
              AND (v.value ->> 'expires_at')::double precision <= p_now
            ORDER BY v.name LIMIT p_size - cardinality(ids)
            FOR UPDATE SKIP LOCKED
        ) v;
        ids := ids || found;
        IF cardinality(ids) >= p_size THEN
            resume := jsonb_build_array(sid, last_name);
            EXIT;
        END IF;
    END LOOP;
    DELETE FROM agentstate_element WHERE variable_id = ANY (ids);
    DELETE FROM agentstate_variable WHERE id = ANY (ids);
    RETURN jsonb_build_object('count', cardinality(ids), 'after', resume);
END $$;
