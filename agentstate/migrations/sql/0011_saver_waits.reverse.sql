-- 0011, undone: the functions as the migrations before it left them.

DROP FUNCTION agentstate_put_checkpoint_writes(text, text, text, bytea, boolean);

-- A checkpoint with its channel values (agentstate.backends.chains: p_values as
-- records on those of p_base, a checkpoint of the namespace; none: a snapshot);
-- a fork (its parent already has another child, or a second root) is marked, or
-- refused with p_refuse. A base not stored (deleted since the saver wrote on it)
-- writes nothing and answers rebase: the saver puts a snapshot instead.
--
-- This function and agentstate_checkpoint, the hot path, keep one plan for each of
-- their statements (plan_cache_mode): with the default, PL/pgSQL plans most of them
-- again on every call, since a plan for the call's values looks cheaper than the
-- generic one by the estimates; all their lookups are by a unique key, so the
-- generic plan is the one they would pick anyway.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_values bytea, p_base text, p_refuse boolean
) RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_thread bigint := agentstate_touch_thread(p_thread);
    v_sibling text;
    v_step text := p_metadata ->> 'step';
    v_writes bytea;
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
    IF p_base IS NOT NULL AND NOT EXISTS (
        SELECT FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND checkpoint_id = p_base
    ) THEN
        RETURN jsonb_build_object('forked', v_sibling IS NOT NULL, 'rebase', true);
    END IF;
    -- the writes of its tasks stored before it (LangGraph may put them first) join it
    WITH moved AS (
        DELETE FROM agentstate_checkpointwrite w
        WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id
        RETURNING w.id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob
    )
    SELECT string_agg(
        agentstate_chain_field(m.task_id) || agentstate_chain_field(m.task_path)
        || int4send(m.idx) || agentstate_chain_field(m.channel) || agentstate_chain_field(m.type)
        || int4send(length(coalesce(m.blob, ''::bytea))) || coalesce(m.blob, ''::bytea),
        ''::bytea ORDER BY m.id)
    INTO v_writes FROM moved m;
    INSERT INTO agentstate_checkpoint AS c
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at, values, base_checkpoint_id, writes)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata,
            p_metadata ->> 'run_id',
            CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                      AND v_step ~ '^-?[0-9]{1,9}$' THEN v_step::integer END,
            v_sibling IS NOT NULL, now(), p_values, p_base, v_writes)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata, run_id = EXCLUDED.run_id, step = EXCLUDED.step,
        values = EXCLUDED.values, base_checkpoint_id = EXCLUDED.base_checkpoint_id,
        writes = CASE WHEN EXCLUDED.writes IS NULL THEN c.writes
                      ELSE coalesce(c.writes, ''::bytea) || EXCLUDED.writes END;
    RETURN jsonb_build_object('forked', v_sibling IS NOT NULL);
END $$;

-- A task's pending writes (p_writes: agentstate.backends.chains' form of the arrays),
-- appended to its checkpoint's row, which is locked (the tasks of one step queue on
-- it for the moment of the update); a call already appended is not appended again,
-- unless it writes a special channel (negative idx), whose last write is kept. A
-- checkpoint not stored yet (LangGraph may put a step's writes before it) keeps them
-- as rows, one per write, as earlier releases did, until its put takes them in: a
-- special channel's replaces the stored one, any other is kept as first written.
CREATE OR REPLACE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text, p_writes bytea,
    p_idx integer[], p_channels text[], p_types text[], p_blobs bytea[]
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_thread bigint;
    v_row bigint;
    v_writes bytea;
BEGIN
    SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
    IF v_thread IS NULL THEN
        v_thread := agentstate_touch_thread(p_thread);
    END IF;
    SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
    WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
    FOR NO KEY UPDATE;
    IF v_row IS NULL THEN
        -- a put of the checkpoint under way holds the thread's row: wait for it to
        -- end, and a put that starts now waits for these rows, which it takes in
        PERFORM FROM agentstate_thread WHERE id = v_thread FOR SHARE;
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NOT NULL THEN
        IF v_writes IS NULL OR position(p_writes IN v_writes) = 0 OR 0 > ANY (p_idx) THEN
            UPDATE agentstate_checkpoint SET writes = coalesce(writes, ''::bytea) || p_writes
            WHERE id = v_row;
        END IF;
        RETURN '{}'::jsonb;
    END IF;
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT v_thread, p_ns, p_id, p_task, p_path, x.idx, x.channel, x.type, x.blob
    FROM unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    WHERE x.idx >= 0
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING;
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT v_thread, p_ns, p_id, p_task, p_path, x.idx, x.channel, x.type, x.blob
    FROM unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    WHERE x.idx < 0
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path;
    RETURN '{}'::jsonb;
END $$;

-- The values of a checkpoint's bases (agentstate.backends.chains), from p_base up
-- its bases to the snapshot, nearest first. PL/pgSQL, so that its plan is kept (a
-- function in SQL with a WITH is planned again on every call).
CREATE OR REPLACE FUNCTION agentstate_checkpoint_chain(p_thread bigint, p_ns text, p_base text)
RETURNS bytea[]
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_chain bytea[];
BEGIN
    WITH RECURSIVE chain AS (
        SELECT x.base_checkpoint_id, x.values, 1 AS depth FROM agentstate_checkpoint x
        WHERE x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.checkpoint_id = p_base
        UNION ALL
        SELECT x.base_checkpoint_id, x.values, chain.depth + 1
        FROM chain JOIN agentstate_checkpoint x
          ON x.thread_id = p_thread AND x.checkpoint_ns = p_ns
         AND x.checkpoint_id = chain.base_checkpoint_id
        WHERE chain.depth < 64
    )
    SELECT array_agg(chain.values ORDER BY chain.depth) INTO v_chain FROM chain;
    RETURN v_chain;
END $$;

-- A checkpoint (p_id NULL: the namespace's latest) with its channel values (its
-- own, its bases' nearest first) and pending writes; no row when there is none.
-- A checkpoint of an earlier release has its values and writes in rows, returned
-- as parallel arrays: a channel whose value is in the checkpoint's own JSON
-- (channel_values) has no row to look up; each other is one lookup by its key.
CREATE OR REPLACE FUNCTION agentstate_checkpoint(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb,
    "values" bytea, chain bytea[], writes bytea,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    c agentstate_checkpoint%ROWTYPE;
    v_chain bytea[];
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
    IF c.values IS NOT NULL THEN
        -- the bases' values read here, not by a call of agentstate_checkpoint_chain
        IF c.base_checkpoint_id IS NOT NULL THEN
            WITH RECURSIVE bases AS (
                SELECT x.base_checkpoint_id, x.values, 1 AS depth FROM agentstate_checkpoint x
                WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns
                  AND x.checkpoint_id = c.base_checkpoint_id
                UNION ALL
                SELECT x.base_checkpoint_id, x.values, bases.depth + 1
                FROM bases JOIN agentstate_checkpoint x
                  ON x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns
                 AND x.checkpoint_id = bases.base_checkpoint_id
                WHERE bases.depth < 64
            )
            SELECT array_agg(bases.values ORDER BY bases.depth) INTO v_chain FROM bases;
        END IF;
        RETURN QUERY
        SELECT c.checkpoint_id::text, c.parent_checkpoint_id::text, c.checkpoint, c.metadata,
               c.values, v_chain, c.writes, NULL::text[], NULL::text[], NULL::bytea[],
               w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
        FROM (
            SELECT array_agg(wr.task_id::text) AS tasks,
                   array_agg(wr.channel::text) AS channels, array_agg(wr.type::text) AS types,
                   array_agg(wr.blob) AS blobs, array_agg(wr.task_path) AS paths,
                   array_agg(wr.idx) AS idx
            FROM agentstate_checkpointwrite wr
            WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
              AND wr.checkpoint_id = c.checkpoint_id
        ) w;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.checkpoint_id::text, c.parent_checkpoint_id::text, c.checkpoint, c.metadata,
           c.values, NULL::bytea[], c.writes,
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

DROP FUNCTION agentstate_put_lock;

DROP FUNCTION agentstate_chain_writes;

DROP FUNCTION agentstate_chain_int;
