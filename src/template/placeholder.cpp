// placeholder: the template engine is being written
