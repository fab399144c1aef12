"""Pictures of the results: self-contained HTML pages (inline SVG and CSS, nothing fetched) and a Chrome trace.
Imports nothing of the plugin's but _names: every layer may draw, and the start-up path never imports it."""
