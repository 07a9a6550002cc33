"""Stage 8, figures and pages: plotly figures of runs, sweeps and the LLC, the standard figure set
(``induction-cliff figures``), export to PDF/PNG/SVG/HTML, the offline HTML report, the attention
explorer and how notebooks show figures. Everything here takes data computed by the earlier
stages and draws it."""
