-- reads:
-- Formulas in plain SQL that several analysis files share. Unlike macros.sql, they call
-- no function that lg-study registers, so they load in the bare DuckDB client too
-- (`.read analysis/sql/macros/formulas.sql` before a file that uses them; docs/analysis.md).
-- lg-study query and the report define them on every connection, before macros.sql
-- (analysis.query.prepare_connection).

-- z = Φ⁻¹((1 + level)/2) for the levels the Wilson intervals of final_accuracy.sql,
-- compare.sql and cascade.sql take; any other level is refused naming them.

create or replace macro normal_quantile(level) as case level
    when 0.5 then 0.6744897501960817::double
    when 0.8 then 1.2815515655446004::double
    when 0.9 then 1.6448536269514722::double
    when 0.95 then 1.959963984540054::double
    when 0.98 then 2.3263478740408408::double
    when 0.99 then 2.5758293035489004::double
    when 0.999 then 3.2905267314919255::double
    else error('level must be one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999')
end;

-- A bootstrap draw's index in [0, n) from its hash (the files that draw say what they
-- hash). n is cast to ubigint because hash() gives a ubigint, and a signed n made DuckDB
-- widen both sides to hugeint, whose modulo took 17 of the report's 47 s at 10,000
-- trials (variance.sql); the draws are the same either way, n being positive.

create or replace macro draw_index(hashed, n) as (hashed % n::ubigint)::bigint;

-- Wilson's score interval as centre ± half: centre = (p + z²/2n)/(1 + z²/n),
-- half = z/(1 + z²/n)·√(p(1 − p)/n + z²/4n²) (final_accuracy.sql, compare.sql,
-- cascade.sql: one trial's accuracy over its questions, a share of seed pairs).

create or replace macro wilson_centre(p, n, z) as (p + z ^ 2 / (2 * n)) / (1 + z ^ 2 / n);

create or replace macro wilson_half(p, n, z) as
    z / (1 + z ^ 2 / n) * sqrt(p * (1 - p) / n + z ^ 2 / (4 * n ^ 2));

-- The parameters the analysis files share, from the text `lg-study query --param` gives
-- (the files read them with getvariable, so that lg-study sees which they take):
-- a coverage level, default 0.95, refused outside [low, high]; a list of test
-- lengths such as '8,16' or '[8, 16]', null (every length) when not given; and a
-- bootstrap's parameters, its replicates (default 1000) and its seed (default 0).

create or replace macro checked_level(given, low, high) as case
    when coalesce(cast(given as double), 0.95) not between low and high
        then error('level must be between ' || low || ' and ' || high)
    else coalesce(cast(given as double), 0.95)
end;

create or replace macro length_list(given) as cast(
    string_split(replace(trim(cast(given as varchar), '[]'), ' ', ''), ',') as bigint[]
);

create or replace macro resample_count(given) as coalesce(cast(given as bigint), 1000);

create or replace macro bootstrap_seed(given) as coalesce(cast(given as bigint), 0);

-- The quantile at fraction q of a sorted list of bootstrap replicates, interpolated
-- linearly between neighbours as quantile_cont does (h = (n − 1)·q), and the two ends
-- of the percentile interval at `level` (variance.sql, compare.sql, seed_bootstrap.sql).

create or replace macro interpolated_quantile(sorted, h) as
    sorted[1 + floor(h)::bigint] + (h - floor(h))
    * (sorted[least(2 + floor(h)::bigint, len(sorted))] - sorted[1 + floor(h)::bigint]);

create or replace macro percentile_low(sorted, level) as
    interpolated_quantile(sorted, (len(sorted) - 1) * (1 - level) / 2);

create or replace macro percentile_high(sorted, level) as
    interpolated_quantile(sorted, (len(sorted) - 1) * (1 + level) / 2);

-- How a sampled answer ends (errors.sql, error_checkpoints.sql): null when right;
-- 'premature end' when shorter than the target (the model stopped early); 'late end'
-- when longer, or when no place is wrong but the answer is (it wrote no end); else
-- 'on time'. Samples written before wrong_places count wrong tokens in wrong_digits.

create or replace macro answer_ending(correct, prediction, target, wrong_places, wrong_digits) as case
    when correct then null
    when length(prediction) < length(target) then 'premature end'
    when length(prediction) > length(target)
        or coalesce(bit_count(wrong_places::bit) = 0, wrong_digits = 0) then 'late end'
    else 'on time'
end;

-- The wrong places of an answer's per-place string (wrong_places, '1' = wrong), as
-- place numbers from 0 (the units).

create or replace macro wrong_place_numbers(wrong_places) as
    [place for place in range(length(wrong_places)) if wrong_places[place + 1] = '1'];
