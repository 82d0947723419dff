-- Formulas in plain SQL that several analysis files share. Unlike macros.sql, they call
-- no function that lg-study registers, so they load in the bare DuckDB client too
-- (`.read analysis/formulas.sql` before a file that uses them; docs/analysis.md).
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

-- Wilson's score interval as centre ± half: centre = (p + z²/2n)/(1 + z²/n),
-- half = z/(1 + z²/n)·√(p(1 − p)/n + z²/4n²) (final_accuracy.sql, compare.sql,
-- cascade.sql: one trial's accuracy over its questions, a share of seed pairs).

create or replace macro wilson_centre(p, n, z) as (p + z ^ 2 / (2 * n)) / (1 + z ^ 2 / n);

create or replace macro wilson_half(p, n, z) as
    z / (1 + z ^ 2 / n) * sqrt(p * (1 - p) / n + z ^ 2 / (4 * n ^ 2));
