-- LangGraph checkpoints (agentstate.contrib.langgraph.AgentStateSaver): the hot
-- path, each one call. The rarer operations (list, delete, copy, prune) run on
-- the ORM on every database: one function would save them nothing that counts.

-- The advisory lock class of the puts of a thread (keyed by hashtext of its id):
-- "agth". A shared hold of it waits for the thread's put under way, if any.
CREATE FUNCTION agentstate_put_lock() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1634169960 $$;

-- A text as agentstate.backends.chains writes it: its length in UTF-8, then it.
CREATE FUNCTION agentstate_chain_field(p_text text) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT int4send(length(convert_to(p_text, 'UTF8'))) || convert_to(p_text, 'UTF8')
$$;

-- A checkpoint with its channel values (agentstate.backends.chains: p_values as
-- records on those of p_base, a checkpoint of the namespace; none: a snapshot);
-- a fork (its parent already has another child, or a second root) is marked, or
-- refused with p_refuse. A base not stored (deleted since the saver wrote on it)
-- writes nothing and answers rebase: the saver puts a snapshot instead. p_writes:
-- task writes to it (agentstate.backends.chains' form) that came to the saver
-- before it, stored with it after those stored before it as rows (rows are
-- older than a row's writes: a checkpoint put again takes its rows in before the
-- writes it holds).
-- p_parent_writes: task writes to its parent that came to the saver after the
-- parent's put had begun, each one call's (p_parent_special: whether it writes a
-- special channel), stored as agentstate_put_checkpoint_writes stores a call's.
--
-- A put holds its thread's put lock (agentstate_put_lock) until it ends, so that a
-- task's writes arriving while it is under way wait for it (below). Then it makes
-- or locks the thread's row (FOR NO KEY UPDATE, as an update locks it): the sweep
-- skips a thread being written, and a put reads the thread's checkpoints only
-- after whatever else held the row (a prune, a copy) has ended. The row's
-- updated_at is indexed (THREAD_TTL), so setting it is never a HOT update: it is
-- set to now only when more than a minute old (base.THREAD_TOUCH), and the sweep
-- allows for that minute.
--
-- Each statement costs its executor's start-up, most of a put's server work, so a
-- put runs few: the put lock is taken in an assignment (PERFORM would start the
-- executor), one SELECT reads the sibling, whether the base is stored and whether
-- early writes wait as rows, and the rows are taken in only when some do.
--
-- This function and agentstate_checkpoint, the hot path, keep one plan for each of
-- their statements (plan_cache_mode): with the default, PL/pgSQL plans most of them
-- again on every call, since a plan for the call's values looks cheaper than the
-- generic one by the estimates; all their lookups are by a unique key, so the
-- generic plan is the one they would pick anyway.
CREATE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_values bytea, p_base text, p_refuse boolean, p_writes bytea,
    p_parent_writes bytea[] DEFAULT NULL, p_parent_special boolean[] DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_locked boolean;
    v_thread bigint;
    v_touched timestamptz;
    v_sibling text;
    v_based boolean;
    v_early boolean;
    v_moved bytea;
    v_step integer := CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                                AND (p_metadata ->> 'step') ~ '^-?[0-9]{1,9}$'
                           THEN (p_metadata ->> 'step')::integer END;
    v_writes bytea;
BEGIN
    v_locked := pg_advisory_xact_lock(agentstate_put_lock(), hashtext(p_thread)) IS NULL;
    SELECT id, updated_at INTO v_thread, v_touched FROM agentstate_thread
    WHERE thread_id = p_thread FOR NO KEY UPDATE;
    IF v_thread IS NULL THEN
        INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
        VALUES (p_thread, now(), now())
        ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
        RETURNING t.id INTO v_thread;
    ELSIF v_touched < now() - interval '1 minute' THEN
        UPDATE agentstate_thread SET updated_at = now() WHERE id = v_thread;
    END IF;
    -- a statement of its own, after the row's lock: it sees what the lock waited for
    SELECT (SELECT s.checkpoint_id FROM agentstate_checkpoint s
            WHERE s.thread_id = v_thread AND s.checkpoint_ns = p_ns
              AND s.parent_checkpoint_id = p_parent AND s.checkpoint_id <> p_id
            LIMIT 1),
           p_base IS NULL OR EXISTS (
               SELECT FROM agentstate_checkpoint b
               WHERE b.thread_id = v_thread AND b.checkpoint_ns = p_ns
                 AND b.checkpoint_id = p_base),
           EXISTS (
               SELECT FROM agentstate_checkpointwrite w
               WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns
                 AND w.checkpoint_id = p_id)
    INTO v_sibling, v_based, v_early;
    IF p_parent IS NULL THEN
        -- a second root (the parent index holds the checkpoints with a parent only)
        SELECT s.checkpoint_id INTO v_sibling FROM agentstate_checkpoint s
        WHERE s.thread_id = v_thread AND s.checkpoint_ns = p_ns
          AND s.parent_checkpoint_id IS NULL AND s.checkpoint_id <> p_id
        LIMIT 1;
    END IF;
    IF v_sibling IS NOT NULL AND p_refuse THEN
        RETURN agentstate_refuse('HistoryForked', jsonb_build_object(
            'thread_id', p_thread, 'checkpoint_ns', p_ns, 'parent', p_parent,
            'head', v_sibling));
    END IF;
    IF NOT v_based THEN
        RETURN CASE WHEN v_sibling IS NULL THEN '{"forked": false, "rebase": true}'::jsonb
                    ELSE '{"forked": true, "rebase": true}'::jsonb END;
    END IF;
    IF v_early THEN
        -- the writes of its tasks stored before it (LangGraph may put them first) join it
        WITH moved AS (
            DELETE FROM agentstate_checkpointwrite w
            WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id
            RETURNING w.id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob
        )
        SELECT string_agg(
            agentstate_chain_field(m.task_id) || agentstate_chain_field(m.task_path)
            || int4send(m.idx) || agentstate_chain_field(m.channel)
            || agentstate_chain_field(m.type)
            || int4send(length(coalesce(m.blob, ''::bytea))) || coalesce(m.blob, ''::bytea),
            ''::bytea ORDER BY m.id)
        INTO v_moved FROM moved m;
    END IF;
    v_writes := CASE WHEN v_moved IS NULL THEN p_writes
                     ELSE v_moved || coalesce(p_writes, ''::bytea) END;
    FOR i IN 1..coalesce(array_length(p_parent_writes, 1), 0) LOOP
        -- its own put lock, held here, never waits for itself
        PERFORM agentstate_put_checkpoint_writes(
            p_thread, p_ns, p_parent, p_parent_writes[i], p_parent_special[i]);
    END LOOP;
    -- DO NOTHING, then an update when stored already: an insert that may update
    -- builds its update at every call
    INSERT INTO agentstate_checkpoint
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at, values, base_checkpoint_id, writes)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata, p_metadata ->> 'run_id',
            v_step, v_sibling IS NOT NULL, now(), p_values, p_base, v_writes)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING;
    IF NOT FOUND THEN
        UPDATE agentstate_checkpoint c SET
            parent_checkpoint_id = p_parent, checkpoint = p_checkpoint, metadata = p_metadata,
            run_id = p_metadata ->> 'run_id', step = v_step, values = p_values,
            base_checkpoint_id = p_base,
            writes = CASE WHEN v_writes IS NULL THEN c.writes
                          ELSE coalesce(v_moved, ''::bytea) || coalesce(c.writes, ''::bytea)
                               || coalesce(p_writes, ''::bytea) END
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    END IF;
    RETURN CASE WHEN v_sibling IS NULL THEN '{"forked": false}'::jsonb
                ELSE '{"forked": true}'::jsonb END;
END $$;

-- The int4 of agentstate.backends.chains' bytes (big-endian, signed) at p_at (from 1).
CREATE FUNCTION agentstate_chain_int(p_bytes bytea, p_at integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || encode(substring(p_bytes FROM p_at FOR 4), 'hex'))::bit(32)::integer
$$;

-- A task's pending writes as agentstate.backends.chains writes them, as rows: its
-- fields each a length (int4) then its bytes, the idx an int4.
CREATE FUNCTION agentstate_chain_writes(p_writes bytea)
RETURNS TABLE (task_id text, task_path text, idx integer, channel text, type text, blob bytea)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_at integer := 1;
    v_field bytea[];
BEGIN
    WHILE v_at <= length(p_writes) LOOP
        -- task_id, task_path, idx, channel, type, blob: an int4 where the idx is
        v_field := '{}';
        FOR i IN 1..6 LOOP
            IF i = 3 THEN
                idx := agentstate_chain_int(p_writes, v_at);
                v_at := v_at + 4;
            ELSE
                v_field := v_field || substring(
                    p_writes FROM v_at + 4 FOR agentstate_chain_int(p_writes, v_at));
                v_at := v_at + 4 + length(v_field[array_length(v_field, 1)]);
            END IF;
        END LOOP;
        task_id := convert_from(v_field[1], 'UTF8');
        task_path := convert_from(v_field[2], 'UTF8');
        channel := convert_from(v_field[3], 'UTF8');
        type := convert_from(v_field[4], 'UTF8');
        blob := v_field[5];
        RETURN NEXT;
    END LOOP;
END $$;

-- A task's pending writes (p_writes, in agentstate.backends.chains' form; p_special:
-- whether one writes a special channel, a negative idx), appended to its
-- checkpoint's row, which is locked (the tasks of one step queue on it for the
-- moment of the update); a call already appended is not appended again, unless it
-- writes a special channel, whose last write is kept. A row holds at most 4,096
-- bytes of writes (chains.HELD_WRITES): a call that would take it past them moves
-- them, then itself, to rows, so that each call copies at most that much however
-- many tasks write to the checkpoint (a fan-out of a thousand tasks of 1 KB would
-- otherwise copy half a gigabyte, and write it to the WAL).
--
-- LangGraph may send a step's writes while the put of its checkpoint is under way:
-- they wait for that put to end (its put lock, taken and given back at once, so
-- that the thread's next put never waits for them), then join its row. A
-- checkpoint not stored yet keeps them as rows, one per write, until its put takes
-- them in: a special channel's replaces the stored one, any other is kept as first
-- written. Nothing here locks the thread's row.
CREATE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_writes bytea, p_special boolean
) RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_thread bigint;
    v_row bigint;
    v_writes bytea;
    v_held constant integer := 4096;  -- chains.HELD_WRITES
BEGIN
    -- most calls: appended to a stored checkpoint's row that has room for them, in one
    -- statement (an update waiting for another reads its conditions again on the row
    -- that one left); the others are taken as they come below
    UPDATE agentstate_checkpoint c SET writes = coalesce(c.writes, ''::bytea) || p_writes
    WHERE c.thread_id = (SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread)
      AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
      AND coalesce(length(c.writes), 0) + length(p_writes) <= v_held
      AND (c.writes IS NULL OR p_special OR position(p_writes IN c.writes) = 0);
    IF FOUND THEN
        RETURN '{}'::jsonb;
    END IF;
    SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
    IF v_thread IS NOT NULL THEN
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NULL THEN
        -- the wait comes before anything is written or locked here, so that the put
        -- waited for never waits for this call in turn
        PERFORM pg_advisory_lock_shared(agentstate_put_lock(), hashtext(p_thread));
        PERFORM pg_advisory_unlock_shared(agentstate_put_lock(), hashtext(p_thread));
        IF v_thread IS NULL THEN
            INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
            VALUES (p_thread, now(), now())
            ON CONFLICT (thread_id) DO NOTHING
            RETURNING t.id INTO v_thread;
            IF v_thread IS NULL THEN
                SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
            END IF;
        END IF;
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NOT NULL THEN
        IF v_writes IS NOT NULL AND NOT p_special AND position(p_writes IN v_writes) > 0 THEN
            RETURN '{}'::jsonb;
        END IF;
        IF coalesce(length(v_writes), 0) + length(p_writes) <= v_held THEN
            UPDATE agentstate_checkpoint SET writes = coalesce(writes, ''::bytea) || p_writes
            WHERE id = v_row;
            RETURN '{}'::jsonb;
        END IF;
        UPDATE agentstate_checkpoint SET writes = NULL WHERE id = v_row;
        p_writes := coalesce(v_writes, ''::bytea) || p_writes;
    END IF;
    -- the first write at each (task, idx), the last for a special channel's, as a read
    -- keeps them (one statement cannot write one row twice)
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT DISTINCT ON (x.task_id, x.idx)
           v_thread, p_ns, p_id, x.task_id, x.task_path, x.idx, x.channel, x.type, x.blob
    FROM agentstate_chain_writes(p_writes) WITH ORDINALITY AS x
    ORDER BY x.task_id, x.idx, CASE WHEN x.idx < 0 THEN -x.ordinality ELSE x.ordinality END
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path
    WHERE EXCLUDED.idx < 0;
    RETURN '{}'::jsonb;
END $$;

-- The values of a checkpoint's bases (agentstate.backends.chains), from p_base up
-- its bases to the snapshot, nearest first. PL/pgSQL, so that its plan is kept (a
-- function in SQL with a WITH is planned again on every call).
CREATE FUNCTION agentstate_checkpoint_chain(p_thread bigint, p_ns text, p_base text)
RETURNS bytea[]
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_chain bytea[];
BEGIN
    WITH RECURSIVE chain AS (
        SELECT x.base_checkpoint_id, x.values, 1 AS depth FROM agentstate_checkpoint x
        WHERE x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.checkpoint_id = p_base
        UNION ALL
        -- each base by its key (LIMIT 1 keeps the lookup from becoming a join that
        -- scans the thread's checkpoints once per base)
        SELECT x.base_checkpoint_id, x.values, chain.depth + 1
        FROM chain CROSS JOIN LATERAL (
            SELECT b.base_checkpoint_id, b.values FROM agentstate_checkpoint b
            WHERE b.thread_id = p_thread AND b.checkpoint_ns = p_ns
              AND b.checkpoint_id = chain.base_checkpoint_id
            LIMIT 1
        ) x
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
CREATE FUNCTION agentstate_checkpoint(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb,
    "values" bytea, chain bytea[], writes bytea,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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
                -- each base by its key (as agentstate_checkpoint_chain)
                SELECT x.base_checkpoint_id, x.values, bases.depth + 1
                FROM bases CROSS JOIN LATERAL (
                    SELECT b.base_checkpoint_id, b.values FROM agentstate_checkpoint b
                    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
                      AND b.checkpoint_id = bases.base_checkpoint_id
                    LIMIT 1
                ) x
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

-- The sweep: one batch of threads last put more than p_ttl ago (updated_at older than
-- p_ttl and the minute a put may leave it unchanged), with everything they hold (a
-- thread being written is locked, so skipped), each table's rows by the batch's ids
-- (40_sweep.sql says why).
CREATE FUNCTION agentstate_purge_threads(p_size integer, p_ttl interval) RETURNS jsonb
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

-- The sweep: one batch of the store's items (AgentStateStore: the variables of
-- the site's scopes keyed p_prefix...) whose expires_at (epoch seconds) is at
-- most now by the database's clock (an item being written is locked, so
-- skipped), by scope then name
-- from the one after (p_after_scope, p_after_name) (NULL: the first). The expiry
-- is inside each item's JSON, with no index, so a batch finds its items by reading
-- the store's items in turn: each batch goes on where the last ended, so that a
-- sweep reads each item once however many batches it takes (begun from the first
-- item each time, every batch read again every item that is not expired).
-- Answers {"count", "after"}.
CREATE FUNCTION agentstate_purge_store_items(
    p_size integer, p_prefix text, p_after_scope bigint, p_after_name text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    epoch_now double precision := agentstate_store_now();
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
              AND (v.value ->> 'expires_at')::double precision <= epoch_now
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

-- Whether a checkpoint holds a value of the channel: in its JSON, in its values
-- (named by values_held), or a row (earlier releases).
CREATE FUNCTION agentstate_checkpoint_holds(
    p_checkpoint jsonb, p_channel text, p_thread bigint, p_ns text
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_checkpoint -> 'channel_values' ? p_channel, false)
        OR coalesce(p_checkpoint -> 'values_held' ? p_channel, false) OR EXISTS (
        SELECT FROM agentstate_checkpointblob x
        WHERE x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.channel = p_channel
          AND x.version = p_checkpoint -> 'channel_versions' ->> p_channel
          AND x.type <> 'empty')
$$;

-- A DeltaChannel's history (AgentStateSaver.get_delta_channel_history): from the
-- parent of a checkpoint (p_id NULL: the namespace's latest) up its parents, one
-- row per ancestor, nearest first, until each channel of p_channels has a stored
-- value: the ancestor's pending writes to the channels still wanted there, and its
-- values of the wanted channels (small ones in channel_values, others in its values
-- and its bases', or as arrays for a checkpoint of an earlier release).
CREATE FUNCTION agentstate_checkpoint_history(
    p_thread text, p_ns text, p_id text, p_channels text[]
)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb,
    "values" bytea, chain bytea[], writes bytea,
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
        SELECT a.id, a.checkpoint_id, a.parent_checkpoint_id, a.checkpoint, a.values,
               a.base_checkpoint_id, a.writes, 1 AS depth, p_channels AS wanted
        FROM target, thread, agentstate_checkpoint a
        WHERE a.thread_id = thread.id AND a.checkpoint_ns = p_ns
          AND a.checkpoint_id = target.parent_checkpoint_id
        UNION ALL
        SELECT a.id, a.checkpoint_id, a.parent_checkpoint_id, a.checkpoint, a.values,
               a.base_checkpoint_id, a.writes, chain.depth + 1,
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
           CASE WHEN coalesce(chain.checkpoint -> 'values_held' ?| chain.wanted, false)
                THEN chain.values END,
           CASE WHEN chain.base_checkpoint_id IS NOT NULL
                     AND coalesce(chain.checkpoint -> 'values_held' ?| chain.wanted, false)
                THEN agentstate_checkpoint_chain(thread.id, p_ns, chain.base_checkpoint_id) END,
           chain.writes,
           b.channels, b.types, b.blobs,
           w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
    FROM chain, thread, LATERAL (
        SELECT array_agg(x.channel::text) AS channels, array_agg(x.type::text) AS types,
               array_agg(x.blob) AS blobs
        FROM unnest(chain.wanted) AS ch
        JOIN agentstate_checkpointblob x
          ON x.thread_id = thread.id AND x.checkpoint_ns = p_ns AND x.channel = ch
         AND x.version = chain.checkpoint -> 'channel_versions' ->> ch AND x.type <> 'empty'
        WHERE chain.values IS NULL
          AND NOT coalesce(chain.checkpoint -> 'channel_values' ? ch, false)
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
