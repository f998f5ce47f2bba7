// placeholder: the chat output parser is being written
