-- 0010 undone: the functions as 0006 left them (values and writes as rows).

DROP FUNCTION agentstate_put_checkpoint(
    text, text, text, text, jsonb, jsonb, bytea, text, boolean);
DROP FUNCTION agentstate_put_checkpoint_writes(
    text, text, text, text, text, bytea, integer[], text[], text[], bytea[]);
DROP FUNCTION agentstate_checkpoint_history(text, text, text, text[]);
DROP FUNCTION agentstate_checkpoint(text, text, text);
DROP FUNCTION agentstate_checkpoint_chain(bigint, text, text);
DROP FUNCTION agentstate_chain_field(text);

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
