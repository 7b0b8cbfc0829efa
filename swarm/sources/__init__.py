"""Where inputs come from: files, git commits, documents."""
