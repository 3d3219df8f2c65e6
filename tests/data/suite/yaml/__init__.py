SHADOW = "the source folder, not the installed package"
