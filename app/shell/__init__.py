"""What both scenes stand on, knowing neither: the page server, the stage and the target gizmo, the question board
and its gates, the busy signal, supervision, the status line, the trainer worker and its panel, methods and the
method picker, robots drawn from URDF, ghost labels, the answers table's rows, typed numbers, report files."""
