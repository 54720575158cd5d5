-- Migration 0005 undone: the functions as 0003 left them.

DROP FUNCTION agentstate_checkpoint_holds(jsonb, text, bigint, text);

DROP FUNCTION agentstate_checkpoint_history(text, text, text, text[]);

DROP FUNCTION agentstate_expire_pauses(integer, text, timestamptz, bigint, boolean);

CREATE OR REPLACE FUNCTION agentstate_expire_pauses(p_size integer, p_actor text) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_pausedrun
        WHERE status = 'pending' AND expires_at <= now()
        ORDER BY expires_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_pausedrun pause SET status = 'expired' FROM batch
        WHERE pause.id = batch.id
        RETURNING pause.chat_id, pause.tool_call_id, pause.owner, pause.created_by_id,
                  pause.question_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'pause.expired', p_actor, NULL, 'pausedrun', chat_id || '#' || tool_call_id,
               created_by_id, owner, jsonb_build_object('question_id', question_id), now()
        FROM expired
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', count(*), 'events', coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]'))
    FROM logged
$$;

-- A checkpoint and its new channel values; a fork (its parent already has
-- another child, or a second root) is marked, or refused with p_refuse.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_channels text[], p_versions text[], p_types text[], p_blobs bytea[], p_refuse boolean
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_thread bigint := agentstate_touch_thread(p_thread);
    v_sibling text;
    v_step text := p_metadata ->> 'step';
BEGIN
    IF p_parent IS NULL THEN
        SELECT checkpoint_id INTO v_sibling FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND parent_checkpoint_id IS NULL
          AND checkpoint_id <> p_id
        LIMIT 1;
    ELSE
        SELECT checkpoint_id INTO v_sibling FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND parent_checkpoint_id = p_parent
          AND checkpoint_id <> p_id
        LIMIT 1;
    END IF;
    IF v_sibling IS NOT NULL AND p_refuse THEN
        RETURN agentstate_refuse('HistoryForked', jsonb_build_object(
            'thread_id', p_thread, 'checkpoint_ns', p_ns, 'parent', p_parent,
            'head', v_sibling));
    END IF;
    INSERT INTO agentstate_checkpointblob (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT v_thread, p_ns, b.channel, b.version, b.type, b.blob
    FROM unnest(p_channels, p_versions, p_types, p_blobs) AS b(channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING;
    INSERT INTO agentstate_checkpoint AS c
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata,
            p_metadata ->> 'run_id',
            CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                      AND v_step ~ '^-?[0-9]{1,9}$' THEN v_step::integer END,
            v_sibling IS NOT NULL, now())
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata, run_id = EXCLUDED.run_id, step = EXCLUDED.step;
    RETURN jsonb_build_object('forked', v_sibling IS NOT NULL);
END $$;

-- A task's pending writes: a special channel's (negative idx) replaces the
-- stored one, any other is kept as first written.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text,
    p_idx integer[], p_channels text[], p_types text[], p_blobs bytea[]
) RETURNS jsonb
LANGUAGE sql AS $$
    INSERT INTO agentstate_checkpointwrite AS w
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT agentstate_touch_thread(p_thread), p_ns, p_id, p_task, p_path,
           x.idx, x.channel, x.type, x.blob
    FROM unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path
    WHERE EXCLUDED.idx < 0;
    SELECT '{}'::jsonb
$$;

-- A checkpoint (p_id NULL: the namespace's latest) with its channel values and
-- pending writes as parallel arrays; no row when there is none.
CREATE OR REPLACE FUNCTION agentstate_checkpoint(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c agentstate_checkpoint%ROWTYPE;
BEGIN
    IF p_id IS NULL THEN
        SELECT cp.* INTO c FROM agentstate_checkpoint cp
        WHERE cp.thread_id = (SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread)
          AND cp.checkpoint_ns = p_ns
        ORDER BY cp.checkpoint_id DESC LIMIT 1;
    ELSE
        SELECT cp.* INTO c FROM agentstate_checkpoint cp
        WHERE cp.thread_id = (SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread)
          AND cp.checkpoint_ns = p_ns AND cp.checkpoint_id = p_id;
    END IF;
    IF c.id IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.checkpoint_id::text, c.parent_checkpoint_id::text, c.checkpoint, c.metadata,
           b.channels, b.types, b.blobs,
           w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
    FROM (
        SELECT array_agg(bl.channel::text) AS channels, array_agg(bl.type::text) AS types,
               array_agg(bl.blob) AS blobs
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v(channel, version)
        JOIN agentstate_checkpointblob bl
          ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
         AND bl.channel = v.channel AND bl.version = v.version
        WHERE bl.type <> 'empty'
    ) b, (
        SELECT array_agg(wr.task_id::text) AS tasks, array_agg(wr.channel::text) AS channels,
               array_agg(wr.type::text) AS types, array_agg(wr.blob) AS blobs,
               array_agg(wr.task_path) AS paths, array_agg(wr.idx) AS idx
        FROM agentstate_checkpointwrite wr
        WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
          AND wr.checkpoint_id = c.checkpoint_id
    ) w;
END $$;

