-- Migration 0005: the LangGraph saver smaller and faster, the sweep of pauses linear
-- (docs/performance.md).

DROP FUNCTION agentstate_expire_pauses(integer, text);

-- Pauses by expiry then id, from the one after (p_after_expires, p_after_id) (NULL:
-- the first): each batch starts where the last ended, so that it reads its own rows
-- only, never the index entries of the rows batches before it expired (dead until
-- vacuumed); and the batch is updated by its ids (= ANY of an array: an index
-- lookup each), where a join with the batch would hash the whole table. Answers
-- "after", where the next batch starts, and with p_events the events.
CREATE OR REPLACE FUNCTION agentstate_expire_pauses(
    p_size integer, p_actor text, p_after_expires timestamptz, p_after_id bigint,
    p_events boolean
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id, expires_at FROM agentstate_pausedrun
        WHERE status = 'pending' AND expires_at <= now()
          AND (expires_at, id) > (coalesce(p_after_expires, '-infinity'), coalesce(p_after_id, 0))
        ORDER BY expires_at, id LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_pausedrun pause SET status = 'expired'
        WHERE pause.id = ANY (ARRAY(SELECT id FROM batch))
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
        'count', (SELECT count(*) FROM logged),
        'events', CASE WHEN p_events THEN (
            SELECT coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]') FROM logged)
            ELSE '[]' END,
        'after', (SELECT jsonb_build_array(expires_at, id) FROM batch
                  ORDER BY expires_at DESC, id DESC LIMIT 1))
$$;

-- A checkpoint and its new channel values; a fork (its parent already has
-- another child, or a second root) is marked, or refused with p_refuse.
--
-- This function and agentstate_checkpoint, the hot path, keep one plan for each of
-- their statements (plan_cache_mode): with the default, PL/pgSQL plans most of them
-- again on every call, since a plan for the call's values looks cheaper than the
-- generic one by the estimates; all their lookups are by a unique key, so the
-- generic plan is the one they would pick anyway.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_channels text[], p_versions text[], p_types text[], p_blobs bytea[], p_refuse boolean
) RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
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
-- stored one, any other is kept as first written (DO NOTHING: a write stored
-- already, a task's retry, locks no row, so a call that changes nothing writes
-- nothing). The thread's row is not locked (only made when missing): the tasks of
-- one step write at once, and the checkpoint they write against was put already.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text,
    p_idx integer[], p_channels text[], p_types text[], p_blobs bytea[]
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH thread AS (
        SELECT coalesce(
            (SELECT id FROM agentstate_thread WHERE thread_id = p_thread),
            agentstate_touch_thread(p_thread)) AS id
    ), written AS (
        SELECT thread.id AS thread_id, x.idx, x.channel, x.type, x.blob
        FROM thread, unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    ), kept AS (
        INSERT INTO agentstate_checkpointwrite
            (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type,
             blob)
        SELECT thread_id, p_ns, p_id, p_task, p_path, idx, channel, type, blob
        FROM written WHERE idx >= 0
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    )
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT thread_id, p_ns, p_id, p_task, p_path, idx, channel, type, blob
    FROM written WHERE idx < 0
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path;
    SELECT '{}'::jsonb
$$;

-- A checkpoint (p_id NULL: the namespace's latest) with its channel values and
-- pending writes as parallel arrays; no row when there is none. A channel whose
-- value is in the checkpoint's own JSON (channel_values) has no row to look up;
-- each other channel is one lookup by its unique key.
CREATE OR REPLACE FUNCTION agentstate_checkpoint(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
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
        SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types,
               array_agg(bl.blob) AS blobs
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v(channel, version)
        CROSS JOIN LATERAL (
            SELECT x.channel::text, x.type::text, x.blob FROM agentstate_checkpointblob x
            WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns
              AND x.channel = v.channel AND x.version = v.version AND x.type <> 'empty'
            LIMIT 1
        ) bl
        WHERE NOT coalesce(c.checkpoint -> 'channel_values' ? v.channel, false)
    ) b, (
        SELECT array_agg(wr.task_id::text) AS tasks, array_agg(wr.channel::text) AS channels,
               array_agg(wr.type::text) AS types, array_agg(wr.blob) AS blobs,
               array_agg(wr.task_path) AS paths, array_agg(wr.idx) AS idx
        FROM agentstate_checkpointwrite wr
        WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
          AND wr.checkpoint_id = c.checkpoint_id
    ) w;
END $$;

-- Whether a checkpoint holds a value of the channel: in its JSON, or a row.
CREATE OR REPLACE FUNCTION agentstate_checkpoint_holds(
    p_checkpoint jsonb, p_channel text, p_thread bigint, p_ns text
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_checkpoint -> 'channel_values' ? p_channel, false) OR EXISTS (
        SELECT FROM agentstate_checkpointblob x
        WHERE x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.channel = p_channel
          AND x.version = p_checkpoint -> 'channel_versions' ->> p_channel
          AND x.type <> 'empty')
$$;

-- A DeltaChannel's history (AgentStateSaver.get_delta_channel_history): from the
-- parent of a checkpoint (p_id NULL: the namespace's latest) up its parents, one
-- row per ancestor, nearest first, until each channel of p_channels has a stored
-- value: the ancestor's pending writes to the channels still wanted there, and its
-- values of the wanted channels (small ones in channel_values, others as arrays).
CREATE OR REPLACE FUNCTION agentstate_checkpoint_history(
    p_thread text, p_ns text, p_id text, p_channels text[]
)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE thread AS (
        SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread
    ), target AS (
        SELECT cp.parent_checkpoint_id FROM agentstate_checkpoint cp, thread
        WHERE cp.thread_id = thread.id AND cp.checkpoint_ns = p_ns
          AND (p_id IS NULL OR cp.checkpoint_id = p_id)
        ORDER BY cp.checkpoint_id DESC LIMIT 1
    ), chain AS (
        SELECT a.id, a.checkpoint_id, a.parent_checkpoint_id, a.checkpoint, 1 AS depth,
               p_channels AS wanted
        FROM target, thread, agentstate_checkpoint a
        WHERE a.thread_id = thread.id AND a.checkpoint_ns = p_ns
          AND a.checkpoint_id = target.parent_checkpoint_id
        UNION ALL
        SELECT a.id, a.checkpoint_id, a.parent_checkpoint_id, a.checkpoint, chain.depth + 1,
               ARRAY(SELECT ch FROM unnest(chain.wanted) AS ch
                     WHERE NOT agentstate_checkpoint_holds(chain.checkpoint, ch, thread.id, p_ns))
        FROM chain, thread, agentstate_checkpoint a
        WHERE a.thread_id = thread.id AND a.checkpoint_ns = p_ns
          AND a.checkpoint_id = chain.parent_checkpoint_id
          AND EXISTS (SELECT FROM unnest(chain.wanted) AS ch
                      WHERE NOT agentstate_checkpoint_holds(chain.checkpoint, ch, thread.id, p_ns))
    )
    SELECT chain.checkpoint_id::text, chain.parent_checkpoint_id::text,
           jsonb_build_object('channel_values', coalesce((
               SELECT jsonb_object_agg(v.key, v.value)
               FROM jsonb_each(chain.checkpoint -> 'channel_values') AS v
               WHERE v.key = ANY (chain.wanted)), '{}')),
           b.channels, b.types, b.blobs,
           w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
    FROM chain, thread, LATERAL (
        SELECT array_agg(x.channel::text) AS channels, array_agg(x.type::text) AS types,
               array_agg(x.blob) AS blobs
        FROM unnest(chain.wanted) AS ch
        JOIN agentstate_checkpointblob x
          ON x.thread_id = thread.id AND x.checkpoint_ns = p_ns AND x.channel = ch
         AND x.version = chain.checkpoint -> 'channel_versions' ->> ch AND x.type <> 'empty'
        WHERE NOT coalesce(chain.checkpoint -> 'channel_values' ? ch, false)
    ) b, LATERAL (
        SELECT array_agg(wr.task_id::text) AS tasks, array_agg(wr.channel::text) AS channels,
               array_agg(wr.type::text) AS types, array_agg(wr.blob) AS blobs,
               array_agg(wr.task_path) AS paths, array_agg(wr.idx) AS idx
        FROM agentstate_checkpointwrite wr
        WHERE wr.thread_id = thread.id AND wr.checkpoint_ns = p_ns
          AND wr.checkpoint_id = chain.checkpoint_id AND wr.channel = ANY (chain.wanted)
    ) w
    ORDER BY chain.depth
$$;

