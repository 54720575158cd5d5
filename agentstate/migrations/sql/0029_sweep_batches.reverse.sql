-- Undoes 0029: the sweep's batches joined with their tables, as 0028 left them.

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
        UPDATE agentstate_approvalrequest request SET status = 'expired' FROM batch
        WHERE request.id = batch.id
        RETURNING request.id, request.run_id, request.created_by_id, request.tool_name,
                  request.call_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'approval.expired', p_actor, NULL, 'approvalrequest', expired.id::text,
               expired.created_by_id, '',
               jsonb_build_object('run_id', run.run_id, 'tool_name', expired.tool_name,
                                  'call_id', expired.call_id),
               now()
        FROM expired JOIN agentstate_run run ON run.id = expired.run_id
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
        DELETE FROM agentstate_pausedrun pause USING batch WHERE pause.id = batch.id
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
        DELETE FROM agentstate_deliveryattempt attempt USING agentstate_delivery delivery, batch
        WHERE attempt.delivery_id = delivery.id AND delivery.event_id = batch.id
    ), deliveries AS (
        DELETE FROM agentstate_delivery delivery USING batch WHERE delivery.event_id = batch.id
    ), purged AS (
        DELETE FROM agentstate_event event USING batch WHERE event.id = batch.id
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
        DELETE FROM agentstate_checkpointwrite w USING batch WHERE w.thread_id = batch.id
    ), blobs AS (
        DELETE FROM agentstate_checkpointblob b USING batch WHERE b.thread_id = batch.id
    ), checkpoints AS (
        DELETE FROM agentstate_checkpoint c USING batch WHERE c.thread_id = batch.id
    ), gone AS (
        DELETE FROM agentstate_thread t USING batch WHERE t.id = batch.id RETURNING 1
    )
    SELECT jsonb_build_object('count', count(*)) FROM gone
$$;

DROP FUNCTION agentstate_purge_store_items(integer, text, double precision, bigint, text);

CREATE FUNCTION agentstate_purge_store_items(
    p_size integer, p_prefix text, p_now double precision
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT v.id FROM agentstate_variable v
        JOIN agentstate_scope s ON s.id = v.scope_id
        WHERE s.owner_id IS NULL AND starts_with(s.key, p_prefix)
          AND jsonb_typeof(v.value -> 'expires_at') = 'number'
          AND (v.value ->> 'expires_at')::double precision <= p_now
        LIMIT p_size
        FOR UPDATE OF v SKIP LOCKED
    ), elements AS (
        DELETE FROM agentstate_element e USING batch WHERE e.variable_id = batch.id
    ), gone AS (
        DELETE FROM agentstate_variable v USING batch WHERE v.id = batch.id RETURNING 1
    )
    SELECT jsonb_build_object('count', count(*)) FROM gone
$$;
