"""Pictures of our results: one self-contained HTML page per result (inline SVG and CSS, nothing fetched), and
`cluster --deep --trace`'s Chrome trace-event JSON.

Each page is drawn from what the command already decided (its report, the processes' records, the health it
read): no check is made again here. Nothing in this package is imported on the start-up path, and it imports
nothing of the plugin's but the standard library, so every layer may draw (the hang watcher included).
See README.md beside this file.
"""
