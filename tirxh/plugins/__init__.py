"""Built-in plugins (each registered under a fixed name; see `tirxh.core.pluginmanager`)."""
