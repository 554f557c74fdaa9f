"""An evaluate module folder (see embexp/metric_modules/__init__.py); evaluate imports the script beside this file."""
