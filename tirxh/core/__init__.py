"""tirxh's lean core: configuration, plugins, collection, the language, the compiler, reports."""
